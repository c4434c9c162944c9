// Command vulncheck runs govulncheck on the module and fails on any
// vulnerability that the code calls, except those in the allowlist, each of
// which must say why it does not apply and must still be reported (a stale
// entry fails too, so the list only shrinks when a fix lands).
//
// Usage (see `make vulncheck`):
//
//	go run ./scripts/vulncheck -govulncheck bin/govulncheck -db bin/vulndb -allow scripts/vulncheck/allow.txt ./...
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// message is one object of govulncheck's -format json stream; only the parts
// read here are declared.
type message struct {
	Config *struct {
		DB             string `json:"db"`
		DBLastModified string `json:"db_last_modified"`
		GoVersion      string `json:"go_version"`
	} `json:"config"`
	OSV *struct {
		ID      string `json:"id"`
		Summary string `json:"summary"`
	} `json:"osv"`
	Finding *struct {
		OSV          string `json:"osv"`
		FixedVersion string `json:"fixed_version"`
		Trace        []struct {
			Module   string `json:"module"`
			Version  string `json:"version"`
			Package  string `json:"package"`
			Function string `json:"function"`
		} `json:"trace"`
	} `json:"finding"`
}

// vuln is what the stream says of one vulnerability.
type vuln struct {
	id, summary, module, version, fixed string
	found, called                       bool
}

type report struct {
	db, dbModified, goVersion string
	vulns                     map[string]*vuln
}

func parse(r io.Reader) (*report, error) {
	rep := &report{vulns: map[string]*vuln{}}
	get := func(id string) *vuln {
		if rep.vulns[id] == nil {
			rep.vulns[id] = &vuln{id: id}
		}
		return rep.vulns[id]
	}
	dec := json.NewDecoder(r)
	for {
		var m message
		if err := dec.Decode(&m); err == io.EOF {
			return rep, nil
		} else if err != nil {
			return nil, fmt.Errorf("reading govulncheck's JSON: %w", err)
		}
		switch {
		case m.Config != nil:
			rep.db, rep.dbModified, rep.goVersion = m.Config.DB, m.Config.DBLastModified, m.Config.GoVersion
		case m.OSV != nil:
			get(m.OSV.ID).summary = m.OSV.Summary
		case m.Finding != nil:
			v := get(m.Finding.OSV)
			v.found, v.fixed = true, m.Finding.FixedVersion
			if len(m.Finding.Trace) > 0 {
				t := m.Finding.Trace[0]
				v.module, v.version = t.Module, t.Version
				// A trace whose vulnerable end names a function is a
				// symbol-level finding: the code calls it.
				if t.Function != "" {
					v.called = true
				}
			}
		}
	}
}

// readAllow reads "ID reason..." lines; blank lines and # comments are
// skipped. Every entry needs a reason.
func readAllow(r io.Reader) (map[string]string, error) {
	allow := map[string]string{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, reason, _ := strings.Cut(line, " ")
		if strings.TrimSpace(reason) == "" {
			return nil, fmt.Errorf("allowlist line %d: %s has no reason", n, id)
		}
		allow[id] = strings.TrimSpace(reason)
	}
	return allow, sc.Err()
}

// verdict returns the problems: called vulnerabilities not allowed, and
// allowed ones that govulncheck no longer reports as called.
func verdict(rep *report, allow map[string]string) []string {
	var problems []string
	ids := make([]string, 0, len(rep.vulns))
	for id := range rep.vulns {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		v := rep.vulns[id]
		if !v.called {
			continue
		}
		if _, ok := allow[id]; ok {
			continue
		}
		fixed := v.fixed
		if fixed == "" {
			fixed = "no fixed version"
		}
		problems = append(problems, fmt.Sprintf("%s: %s (%s@%s; fixed in %s)", id, v.summary, v.module, v.version, fixed))
	}
	var stale []string
	for id := range allow {
		if v := rep.vulns[id]; v == nil || !v.called {
			stale = append(stale, id)
		}
	}
	sort.Strings(stale)
	for _, id := range stale {
		problems = append(problems, fmt.Sprintf("%s is in the allowlist but no longer called: remove it", id))
	}
	return problems
}

func main() {
	bin := flag.String("govulncheck", "govulncheck", "the govulncheck binary")
	db := flag.String("db", "", "directory of a v1 vulnerability database (file:// source); empty: govulncheck's default")
	allowPath := flag.String("allow", "", "allowlist file: one 'ID reason' a line")
	flag.Parse()
	patterns := flag.Args()
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	allow := map[string]string{}
	if *allowPath != "" {
		f, err := os.Open(*allowPath)
		if err != nil {
			fatal(err)
		}
		allow, err = readAllow(f)
		_ = f.Close()
		if err != nil {
			fatal(err)
		}
	}
	args := []string{"-format", "json"}
	if *db != "" {
		abs, err := filepath.Abs(*db)
		if err != nil {
			fatal(err)
		}
		args = append(args, "-db", "file://"+filepath.ToSlash(abs))
	}
	var out, errOut bytes.Buffer
	cmd := exec.Command(*bin, append(args, patterns...)...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	// With -format json, govulncheck exits 0 whatever it finds; a non-zero
	// exit is a failure to scan.
	if err := cmd.Run(); err != nil {
		fatal(fmt.Errorf("%s: %w\n%s", *bin, err, errOut.String()))
	}
	rep, err := parse(&out)
	if err != nil {
		fatal(err)
	}
	called, notCalled := 0, 0
	for _, v := range rep.vulns {
		switch {
		case v.called:
			called++
		case v.found:
			notCalled++
		}
	}
	fmt.Printf("govulncheck: %s, database %s (modified %s): %d called (%d allowed), %d in imported packages or required modules but not called\n",
		rep.goVersion, rep.db, rep.dbModified, called, len(allow), notCalled)
	for id, reason := range allow {
		fmt.Printf("  allowed %s: %s\n", id, reason)
	}
	if problems := verdict(rep, allow); len(problems) > 0 {
		fmt.Println("vulncheck failed:")
		for _, p := range problems {
			fmt.Println("  " + p)
		}
		os.Exit(1)
	}
	fmt.Println("vulncheck: clean")
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "vulncheck:", err)
	os.Exit(2)
}

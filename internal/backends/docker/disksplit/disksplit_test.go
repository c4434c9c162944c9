package disksplit

import (
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// repoRoot is the module root, four levels up from this package.
const repoRoot = "../../../.."

func TestSharesTable(t *testing.T) {
	seen, fixed, rest := map[string]bool{}, int64(0), 0
	for _, s := range Shares {
		if seen[s.Path] {
			t.Errorf("%s is listed twice", s.Path)
		}
		seen[s.Path] = true
		if s.Percent < 0 {
			t.Errorf("%s: negative share %d", s.Path, s.Percent)
		}
		if s.Percent == 0 {
			rest++
		}
		fixed += s.Percent
	}
	if rest == 0 || fixed >= 100 {
		t.Fatalf("fixed shares add up to %d%% with %d paths taking the rest: the rest must be a real share", fixed, rest)
	}
	if !seen[ShmPath] {
		t.Errorf("%s has no share: every strategy sizes it from disk_mb", ShmPath)
	}
	if got := RestPercent()*float64(rest) + float64(fixed); math.Abs(got-100) > 1e-9 {
		t.Errorf("shares add up to %v%%", got)
	}
}

// The texts derived from the table name every path once (but those left
// out), with its share, so the checker below reads them back as the table says.
func TestSummaryAgreesWithTable(t *testing.T) {
	for _, except := range [][]string{nil, {ShmPath}} {
		s := Summary(except...)
		if bad := checkText(s); bad != "" {
			t.Errorf("Summary(%v) = %q: %s", except, s, bad)
		}
		named := map[string]int{}
		for _, p := range pathRE.FindAllString(s, -1) {
			named[p]++
		}
		for _, sh := range Shares {
			want := 1
			if slices.Contains(except, sh.Path) {
				want = 0
			}
			if named[sh.Path] != want {
				t.Errorf("Summary(%v) = %q names %s %d times, want %d", except, s, sh.Path, named[sh.Path], want)
			}
		}
	}
}

// No hand-written text restates a share that differs from the table: every
// sentence of the README, the docs, the templates and the Go sources that
// puts a percentage next to one of the writable paths must give that path the
// table's share. The generated docs must carry the derived text (else
// `make generate` was not run), and the README's worked example must hold.
func TestTextsAgreeWithTable(t *testing.T) {
	var files []string
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "vendor", "bin", "dist":
				return filepath.SkipDir
			}
			return nil
		}
		name := d.Name()
		if strings.HasSuffix(name, ".md") || strings.HasSuffix(name, ".tmpl") ||
			(strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go")) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		if strings.HasSuffix(f, ".go") {
			text = goText(text)
		}
		for _, s := range sentences(text) {
			if bad := checkText(s); bad != "" {
				t.Errorf("%s: %s\n\tin: %s", strings.TrimPrefix(f, repoRoot+"/"), bad, strings.TrimSpace(s))
			}
			if pathRE.MatchString(s) && strings.Contains(s, "%") {
				checked++
			}
		}
	}
	if checked == 0 {
		t.Fatal("no text was checked")
	}

	docs, err := os.ReadFile(filepath.Join(repoRoot, "docs/resources/template.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{Summary(), Summary(ShmPath)} {
		if !strings.Contains(string(docs), want) {
			t.Errorf("docs/resources/template.md does not carry %q: run `make generate`", want)
		}
	}

	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range exampleRE.FindAllStringSubmatch(strings.Join(strings.Fields(string(readme)), " "), -1) {
		disk, _ := strconv.ParseFloat(m[1], 64)
		pct, ok := Percent(m[2])
		held, _ := strconv.ParseFloat(m[3], 64)
		if want := disk * pct / 100; !ok || math.Abs(held-want) > 1 {
			t.Errorf("README: with disk_mb = %s, %s holds about %s MB; the table gives %.1f MB", m[1], m[2], m[3], want)
		}
	}
}

var (
	// A path-like token, or a percentage.
	tokenRE = regexp.MustCompile(`(/[A-Za-z0-9_./-]*[A-Za-z0-9_])|(\d+(?:\.\d+)?)%`)
	pathRE  = regexp.MustCompile(`/[A-Za-z0-9_./-]*[A-Za-z0-9_]`)
	// "With `disk_mb = 256` (...), `/work` holds about 96 MB".
	exampleRE = regexp.MustCompile("disk_mb = (\\d+)`?[^.]*?`(/[a-z/]+)` holds about (\\d+) MB")
	// Sentence ends: a full stop before white space, or a blank line.
	sentenceRE = regexp.MustCompile(`\.\s+|\n\s*\n`)
)

func sentences(text string) []string { return sentenceRE.Split(text, -1) }

// goText keeps a Go file's comments and string literals as running text:
// comment markers, quotes and string concatenation are dropped.
func goText(src string) string {
	r := strings.NewReplacer("// ", "", "//", "", "\" +\n", "", "\"", "")
	return r.Replace(src)
}

// checkText reads the percentages next to the table's paths in one sentence,
// written either as "/tmp and /work about 37.5% each" (paths, then their
// share) or as "10% for /var/tmp" (a share, then its paths), and returns
// what disagrees with the table ("" when the sentence agrees, or puts no
// percentage next to a path).
func checkText(s string) string {
	type token struct {
		path string
		pct  float64
	}
	var toks []token
	hasPath, hasPct := false, false
	for _, m := range tokenRE.FindAllStringSubmatch(s, -1) {
		if m[1] != "" {
			if _, ok := Percent(m[1]); ok {
				toks = append(toks, token{path: m[1]})
				hasPath = true
			}
			continue
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			continue
		}
		toks = append(toks, token{pct: v})
		hasPct = true
	}
	if !hasPath || !hasPct {
		return ""
	}
	same := func(path string, v float64) bool {
		p, _ := Percent(path)
		return math.Abs(p-v) < 0.05
	}
	// Every percentage must be the share of a path the sentence names.
	for _, tk := range toks {
		if tk.path != "" {
			continue
		}
		named := false
		for _, p := range toks {
			named = named || (p.path != "" && same(p.path, tk.pct))
		}
		if !named {
			return FormatPercent(tk.pct) + " is the share of no path this sentence names"
		}
	}
	known := func(v float64) bool {
		for _, sh := range Shares {
			if same(sh.Path, v) {
				return true
			}
		}
		return false
	}
	// Paths, then their share.
	after := ""
	var pending []string
	for _, tk := range toks {
		if tk.path != "" {
			pending = append(pending, tk.path)
			continue
		}
		if len(pending) == 0 && !known(tk.pct) {
			after = FormatPercent(tk.pct) + " is no share in the table"
		}
		for _, p := range pending {
			if !same(p, tk.pct) && after == "" {
				after = p + " is given " + FormatPercent(tk.pct) + ", the table says " + PercentText(p)
			}
		}
		pending = nil
	}
	if after == "" {
		return ""
	}
	// A share, then its paths.
	current := math.NaN()
	for _, tk := range toks {
		if tk.path == "" {
			current = tk.pct
			continue
		}
		if !math.IsNaN(current) && !same(tk.path, current) {
			return after
		}
	}
	return ""
}

// checkText refuses what restates a share wrongly, and takes what the
// table's own summary says.
func TestCheckText(t *testing.T) {
	for _, bad := range []string{
		"/work gets 50% of disk_mb",
		"/var/tmp holds 37.5%",
		"/tmp and /work about 10% each",
		"10% for /tmp",
		"/work 99%, and 5% for /root",
		"/work 50% and /tmp",
	} {
		if checkText(bad) == "" {
			t.Errorf("checkText accepts %q", bad)
		}
	}
	for _, good := range []string{Summary(), Summary(ShmPath), "/var/tmp gets " + PercentText("/var/tmp") + " of disk_mb"} {
		if msg := checkText(good); msg != "" {
			t.Errorf("checkText refuses %q: %s", good, msg)
		}
	}
}

package main

import (
	"bytes"
	"encoding/xml"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// go test ./cmd/sandboxio -run TestPolicyCheckGolden -update rewrites the
// golden files from what policy check prints now; review the diff.
var updateGolden = flag.Bool("update", false, "rewrite the golden outputs of policy check under testdata/golden")

// planDir holds the plans the outputs are taken on: Terraform's own
// (plan-create, plan-update, plan-read) and plan-refused, built from them
// by hand with what no real plan can hold (refusals, a waiver at work).
var planDir = filepath.Join("..", "..", "internal", "policycheck", "testdata")

// goldenCases are the policy check runs whose whole output is held: each
// in every format.
var goldenCases = []struct {
	name string
	args []string
	exit int
}{
	{"plan-create", []string{filepath.Join(planDir, "plan-create.json")}, exitOK},
	{"plan-create.fail-on-deferred", []string{"--fail-on-deferred", filepath.Join(planDir, "plan-create.json")}, exitDeferred},
	{"plan-update", []string{filepath.Join(planDir, "plan-update.json")}, exitOK},
	{"plan-read", []string{filepath.Join(planDir, "plan-read.json")}, exitOK},
	{"plan-refused", []string{"--policy", filepath.Join("..", "..", "examples", "policies"),
		"--waivers", filepath.Join("..", "..", "examples", "policies", "waivers.yaml"),
		filepath.Join(planDir, "plan-refused.json")}, exitDenied},
}

// sarifDriverVersion is the one value of the outputs that varies: the
// CLI's version, set at link time. go-sarif writes the driver's keys in
// alphabetical order, so its version follows its rules.
var sarifDriverVersion = regexp.MustCompile(`(?s)("name": "sandboxio",.*?"version": )"[^"]*"`)

func normalise(format string, out []byte) []byte {
	if format == "sarif" {
		out = sarifDriverVersion.ReplaceAll(out, []byte(`${1}"VERSION"`))
	}
	return out
}

// TestPolicyCheckGolden holds the text, JSON, SARIF and JUnit outputs of
// policy check whole, byte for byte, and checks that each SARIF output is
// valid against the OASIS SARIF 2.1.0 schema and each JUnit output has the
// structure CI systems read.
func TestPolicyCheckGolden(t *testing.T) {
	sarif := sarifSchema(t)
	for _, tc := range goldenCases {
		for _, format := range []string{"text", "json", "sarif", "junit"} {
			t.Run(tc.name+"/"+format, func(t *testing.T) {
				args := append([]string{"policy", "check", "--format", format}, tc.args...)
				code, out, errOut := cli(t, "", args...)
				if code != tc.exit {
					t.Fatalf("exit %d, want %d; stderr %q", code, tc.exit, errOut)
				}
				got := normalise(format, []byte(out))
				ext := map[string]string{"text": "txt", "json": "json", "sarif": "sarif.json", "junit": "xml"}[format]
				golden := filepath.Join("testdata", "golden", tc.name+"."+ext)
				if *updateGolden {
					if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(golden, got, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run go test ./cmd/sandboxio -run TestPolicyCheckGolden -update)", err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("sandboxio %s differs from %s (if the change is meant, rerun with -update and review the diff):\n%s",
						strings.Join(args, " "), golden, firstDiff(string(want), string(got)))
				}
				switch format {
				case "sarif":
					doc, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(out)))
					if err != nil {
						t.Fatal(err)
					}
					if err := sarif.Validate(doc); err != nil {
						t.Errorf("the SARIF output is not valid SARIF 2.1.0: %v", err)
					}
				case "junit":
					if err := checkJUnit([]byte(out)); err != nil {
						t.Errorf("the JUnit output: %v", err)
					}
				}
			})
		}
	}
}

// sarifSchema compiles the OASIS SARIF 2.1.0 schema (errata 01) kept in
// testdata/sarif, offline.
func sarifSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "sarif", "sarif-schema-2.1.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	const url = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// TestSARIFSchemaRefuses makes sure the schema check can fail: a log
// without runs, a result without a message and an unknown level are not
// SARIF 2.1.0.
func TestSARIFSchemaRefuses(t *testing.T) {
	sch := sarifSchema(t)
	for _, bad := range []string{
		`{"version": "2.1.0"}`,
		`{"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x"}}, "results": [{"ruleId": "A"}]}]}`,
		`{"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x"}}, "results": [{"message": {"text": "m"}, "level": "fatal"}]}]}`,
	} {
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(bad))
		if err != nil {
			t.Fatal(err)
		}
		if sch.Validate(doc) == nil {
			t.Errorf("the schema accepts %s", bad)
		}
	}
}

// The JUnit XML shape CI systems read (the common JUnit XSD): testsuites
// holding testsuite elements, each with a name and counts that match its
// test cases; each testcase with a name and a classname; a failure with a
// message and a type; skipped with a message.
type junitDoc struct {
	XMLName xml.Name `xml:"testsuites"`
	Suites  []struct {
		Attrs []xml.Attr `xml:",any,attr"`
		Cases []struct {
			Attrs   []xml.Attr `xml:",any,attr"`
			Failure *struct {
				Attrs []xml.Attr `xml:",any,attr"`
			} `xml:"failure"`
			Skipped *struct {
				Attrs []xml.Attr `xml:",any,attr"`
			} `xml:"skipped"`
			Error *struct{} `xml:"error"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func checkJUnit(out []byte) error {
	var root struct {
		XMLName xml.Name   `xml:"testsuites"`
		Attrs   []xml.Attr `xml:",any,attr"`
	}
	if err := xml.Unmarshal(out, &root); err != nil {
		return fmt.Errorf("not JUnit XML (a testsuites root): %w", err)
	}
	var doc junitDoc
	if err := xml.Unmarshal(out, &doc); err != nil {
		return err
	}
	attr := func(as []xml.Attr, name string) (string, bool) {
		for _, a := range as {
			if a.Name.Local == name {
				return a.Value, true
			}
		}
		return "", false
	}
	count := func(as []xml.Attr, name string) (int, error) {
		v, ok := attr(as, name)
		if !ok {
			return 0, fmt.Errorf("no %s attribute", name)
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%s=%q is not a count", name, v)
		}
		return n, nil
	}
	var total [4]int // tests, failures, skipped, errors
	for i, s := range doc.Suites {
		name, ok := attr(s.Attrs, "name")
		if !ok || name == "" {
			return fmt.Errorf("testsuite %d has no name", i)
		}
		var want [4]int
		for j, c := range s.Cases {
			if n, ok := attr(c.Attrs, "name"); !ok || n == "" {
				return fmt.Errorf("testsuite %s: testcase %d has no name", name, j)
			}
			if _, ok := attr(c.Attrs, "classname"); !ok {
				return fmt.Errorf("testsuite %s: testcase %d has no classname", name, j)
			}
			want[0]++
			if c.Failure != nil {
				want[1]++
				for _, a := range []string{"message", "type"} {
					if v, ok := attr(c.Failure.Attrs, a); !ok || v == "" {
						return fmt.Errorf("testsuite %s: a failure has no %s", name, a)
					}
				}
			}
			if c.Skipped != nil {
				want[2]++
				if v, ok := attr(c.Skipped.Attrs, "message"); !ok || v == "" {
					return fmt.Errorf("testsuite %s: a skipped case has no message", name)
				}
			}
			if c.Error != nil {
				want[3]++
			}
		}
		for k, a := range []string{"tests", "failures", "skipped", "errors"} {
			n, err := count(s.Attrs, a)
			if err != nil {
				return fmt.Errorf("testsuite %s: %w", name, err)
			}
			if n != want[k] {
				return fmt.Errorf("testsuite %s: %s=%d, its test cases make %d", name, a, n, want[k])
			}
			total[k] += n
		}
	}
	for k, a := range []string{"tests", "failures", "skipped", "errors"} {
		n, err := count(root.Attrs, a)
		if err != nil {
			return fmt.Errorf("testsuites: %w", err)
		}
		if n != total[k] {
			return fmt.Errorf("testsuites: %s=%d, its suites make %d", a, n, total[k])
		}
	}
	return nil
}

// TestCheckJUnitRefuses makes sure the JUnit check can fail.
func TestCheckJUnitRefuses(t *testing.T) {
	for _, bad := range []string{
		`<testsuite name="x" tests="0"/>`,
		`<testsuites tests="1" failures="0" skipped="0" errors="0"><testsuite name="s" tests="1" failures="0" skipped="0" errors="0"><testcase classname="c"/></testsuite></testsuites>`,
		`<testsuites tests="1" failures="0" skipped="0" errors="0"><testsuite name="s" tests="1" failures="0" skipped="0" errors="0"><testcase name="n" classname="c"><failure message="m" type="t"/></testcase></testsuite></testsuites>`,
		`<testsuites tests="2" failures="0" skipped="0" errors="0"><testsuite name="s" tests="1" failures="0" skipped="0" errors="0"><testcase name="n" classname="c"/></testsuite></testsuites>`,
	} {
		if checkJUnit([]byte(bad)) == nil {
			t.Errorf("checkJUnit accepts %s", bad)
		}
	}
}

// firstDiff shows where two outputs first part, with a little context.
func firstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(wl), len(gl)); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return fmt.Sprintf("line %d:\n- %s\n+ %s", i+1, w, g)
		}
	}
	return "(they differ in length only)"
}

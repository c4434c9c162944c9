package prose

import (
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// repoRoot is the module root, two levels up from this package.
const repoRoot = "../.."

// backendRun is a list of two or more backends in running text: "E2B, Modal
// and Vercel", "docker, e2b or modal", "Docker with runc and Kubernetes",
// "`docker://`, `e2b://`", each name optionally qualified in parentheses.
var backendRun = func() *regexp.Regexp {
	name := "`?\\b(?:docker|e2b|modal|vercel|daytona|kubernetes)(?:://[A-Z/]*)?`?(?: with (?:runtime )?[a-z]+)?(?: \\([^()]*\\))?"
	return regexp.MustCompile(`(?i)` + name + `(?:(?:,| and| or|, and|, or) ` + name + `)+`)
}()

// notCapabilityLists are the runs of backend names that list something
// other than what a backend can do, by file and the run itself.
var notCapabilityLists = map[string]string{
	// the local conformance servers that run on Docker
	"templates/guides/backend-docker.md.tmpl: E2B, Modal, Vercel and Daytona": "the fakes, not a capability",
}

// placeholder is how a rule's or a schema's text names a list: ${NAME} or
// ${NAME|or} (policies.Expand fills them).
var placeholder = regexp.MustCompile(`\$\{([a-zA-Z_]+(?:\|or)?)\}`)

// TestProseAgreesWithData fails when a hand-written sentence lists
// backends: every list of backends in the README, the templates, the
// examples, the Rego rules' METADATA and strings, and the Go sources'
// strings (schema descriptions, error fixes) must be rendered from the
// capability data, through a generated region or a ${NAME} placeholder; and
// every generated region must hold what the data renders now.
func TestProseAgreesWithData(t *testing.T) {
	checked := 0
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, repoRoot+"/"))
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "vendor", "bin", "dist", "testdata", "docs":
				// docs/ is generated from templates/ and the schema (make docs-check)
				return filepath.SkipDir
			}
			return nil
		}
		var text string
		switch {
		case strings.HasSuffix(rel, "_test.go") || strings.HasSuffix(rel, "_test.rego") || strings.HasSuffix(rel, ".pb.go"):
			return nil
		case strings.HasSuffix(rel, ".go"):
			text = goStrings(t, p)
		case strings.HasSuffix(rel, ".rego"):
			text = regoProse(read(t, p))
		case strings.HasSuffix(rel, ".md") || strings.HasSuffix(rel, ".tmpl") || strings.HasSuffix(rel, ".tf"):
			text = read(t, p)
			switch rel {
			case "CHANGELOG.md":
				return nil // history, as it was said
			case "templates/guides/policies.md.tmpl":
				return nil // sandboxio policy docs writes it from the rules (TestPolicyDocs_MatchesCommittedCatalogue)
			}
			for _, m := range Region.FindAllStringSubmatch(text, -1) {
				checked++
				want, ok := Render(m[1])
				if !ok {
					t.Errorf("%s: region %q names no list", rel, m[1])
				} else if m[2] != want {
					t.Errorf("%s: region %s says %q, the data %q: run go generate ./...", rel, m[1], m[2], want)
				}
			}
			text = Region.ReplaceAllString(text, "LIST")
		default:
			return nil
		}
		text = strings.Join(strings.Fields(text), " ")
		for _, m := range placeholder.FindAllStringSubmatch(text, -1) {
			if !strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, ".rego") {
				break // ${v} is the shell's in Markdown
			}
			checked++
			if _, ok := Render(m[1]); !ok {
				t.Errorf("%s: placeholder %s names no list", rel, m[0])
			}
		}
		for _, run := range backendRun.FindAllString(text, -1) {
			if _, ok := notCapabilityLists[rel+": "+run]; ok {
				continue
			}
			t.Errorf("%s: lists backends by hand: %q; render it from the capability data (${NAME} or <!--list:NAME-->, internal/prose)", rel, run)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no generated list was found")
	}
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// goStrings returns a Go file's string literals, those joined by + as one,
// each on its own line: what a user reads, not the comments.
func goStrings(t *testing.T, p string) string {
	t.Helper()
	src := []byte(read(t, p))
	var s scanner.Scanner
	fset := token.NewFileSet()
	s.Init(fset.AddFile(p, -1, len(src)), src, nil, 0)
	var b strings.Builder
	prevString := false
	for {
		_, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		switch tok {
		case token.STRING:
			if v, err := strconv.Unquote(lit); err == nil {
				b.WriteString(v)
			}
			prevString = true
			continue
		case token.ADD:
			if prevString {
				continue
			}
		}
		if prevString {
			b.WriteString("\n.\n")
		}
		prevString = false
	}
	return b.String()
}

// regoProse returns a Rego module without its plain comments: the METADATA
// annotations (the catalogue's and the findings' texts) and the code, whose
// strings are the messages and computed fixes.
func regoProse(src string) string {
	var b strings.Builder
	inMeta := false
	for _, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "# METADATA":
			inMeta = true
		case strings.HasPrefix(trimmed, "#"):
			if inMeta {
				b.WriteString(strings.TrimPrefix(trimmed, "#"))
				b.WriteString("\n")
			}
		default:
			inMeta = false
			b.WriteString(line)
			b.WriteString("\n.\n")
		}
	}
	return b.String()
}

// The capability data's prose section, which the Rego rules and
// policies.Expand read, is what Lists renders from the rest of the data.
func TestProseSectionIsCurrent(t *testing.T) {
	p := filepath.Join(repoRoot, "policies", "capabilities", "data.json")
	b := []byte(read(t, p))
	want, err := WithProseSection(b)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != string(b) {
		t.Error("policies/capabilities/data.json: the prose section is stale: run go generate ./...")
	}
}

// Every backend the data names has its guide, which the README's list of
// guides links to.
func TestEveryBackendHasAGuide(t *testing.T) {
	for _, n := range Names() {
		for _, dir := range []string{"templates/guides", "docs/guides"} {
			ext := ".md"
			if dir == "templates/guides" {
				ext = ".md.tmpl"
			}
			if _, err := os.Stat(filepath.Join(repoRoot, dir, "backend-"+n.Backend+ext)); err != nil {
				t.Errorf("backend %s has no guide: %v", n.Backend, err)
			}
		}
	}
}

// The exit codes of run and run-code are tabled twice, in the README and in
// the CLI guide; both must say the same.
func TestExitCodeTablesAgree(t *testing.T) {
	table := regexp.MustCompile(`\| code \| meaning \|\n(?:\|.*\|\n)+`)
	readme := table.FindString(read(t, filepath.Join(repoRoot, "README.md")))
	guide := table.FindString(read(t, filepath.Join(repoRoot, "templates", "guides", "cli.md.tmpl")))
	if readme == "" || readme != guide {
		t.Errorf("the exit-code tables of README.md and templates/guides/cli.md.tmpl differ:\n%s\n%s", readme, guide)
	}
}

package policycheck

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/verdict"
)

// Encoded here, not through go-junit-report/v2/junit: it drops zero counts
// CI systems read and writes time="" on every suite
// (docs/design/policy-check-libraries.md).
//
// JUnit XML as CI systems read it: a test suite per resource and a test
// case per resource and rule. A refusal is a failure; a waived finding and
// a resource checked only at apply are skipped, with the reason; a warning
// passes and says so in system-out.

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Errors   int          `xml:"errors,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Errors     int             `xml:"errors,attr"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

func renderJUnit(w io.Writer, rep *Report, o RenderOptions) error {
	out := junitSuites{Name: "sandboxio policy check " + rep.Plan}
	for _, r := range rep.Resources {
		suite := junitSuite{Name: r.Address, Properties: []junitProperty{
			{Name: "type", Value: r.Type}, {Name: "action", Value: r.Action}, {Name: "kind", Value: r.Kind},
		}}
		if r.Skipped != "" {
			// One case: none of the rules ran.
			suite.Cases = []junitCase{{Name: rules.NotChecked + ": not checked", Classname: r.Address,
				Skipped: &junitSkipped{Message: skippedText(r)}}}
			suite.Tests, suite.Skipped = 1, 1
			out.Tests++
			out.Skipped++
			out.Suites = append(out.Suites, suite)
			continue
		}
		byRule := map[string][]verdict.Result{}
		for _, x := range r.Results {
			byRule[x.ID] = append(byRule[x.ID], x)
		}
		docs := rep.Rules
		for _, x := range r.Results {
			if !inCatalogue(rep.Rules, x.ID) {
				docs = append(docs, RuleDoc{Doc: rules.Doc{ID: x.ID, Title: x.Title}})
			}
		}
		for _, rule := range docs {
			if rule.Package == "go" && len(byRule[rule.ID]) == 0 && (rule.ID != rules.CheckedAtApply || len(r.Deferred) == 0) {
				continue // Go-side refusals appear only when they fired
			}
			c := junitCase{Name: caseName(rule), Classname: r.Address}
			results := byRule[rule.ID]
			switch {
			case rule.ID == rules.CheckedAtApply && o.FailOnDeferred:
				// It fails the check (--fail-on-deferred): a failure here too.
				c.Failure = &junitFailure{Message: deferredText(r), Type: "CheckedAtApply",
					Text: rules.CheckedAtApply + " [CheckedAtApply]\n" + deferredText(r) + "\nwith --fail-on-deferred, anything checked only at apply fails the check"}
			case rule.ID == rules.CheckedAtApply:
				c.Skipped = &junitSkipped{Message: deferredText(r)}
			case hasOutcome(results, verdict.Fail):
				c.Failure = failure(results)
			case r.Kind == "":
				c.Skipped = &junitSkipped{Message: notEvaluated(r)}
			case hasOutcome(results, verdict.Waived):
				c.Skipped = &junitSkipped{Message: waivedText(results)}
			case hasOutcome(results, verdict.Warn) && o.FailOnWarn:
				// With --fail-on-warn a warning fails the check, so it is
				// a failure here too: CI reads the report, not the exit code.
				c.Failure = failureOf(results, verdict.Warn)
			case hasOutcome(results, verdict.Warn):
				c.SystemOut = warningText(results)
			}
			if c.Failure != nil {
				suite.Failures++
			}
			if c.Skipped != nil {
				suite.Skipped++
			}
			suite.Tests++
			suite.Cases = append(suite.Cases, c)
		}
		out.Tests += suite.Tests
		out.Failures += suite.Failures
		out.Skipped += suite.Skipped
		out.Suites = append(out.Suites, suite)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func inCatalogue(rules []RuleDoc, id string) bool {
	for _, r := range rules {
		if r.ID == id {
			return true
		}
	}
	return false
}

func caseName(r RuleDoc) string {
	if r.Title == "" {
		return r.ID
	}
	return r.ID + ": " + r.Title
}

func hasOutcome(rs []verdict.Result, o verdict.Outcome) bool {
	for _, r := range rs {
		if r.Outcome == o {
			return true
		}
	}
	return false
}

func failure(rs []verdict.Result) *junitFailure { return failureOf(rs, verdict.Fail) }

// failureOf reports the results with the given outcome as one failure.
func failureOf(rs []verdict.Result, outcome verdict.Outcome) *junitFailure {
	var msgs, text []string
	class := ""
	for _, r := range rs {
		if r.Outcome != outcome {
			continue
		}
		class = r.Class
		m := r.Message
		if r.Attribute != "" {
			m = r.Attribute + ": " + m
		}
		msgs = append(msgs, m)
		t := fmt.Sprintf("%s [%s, %s]\n%s", r.ID, r.Class, r.Enforcement, m)
		if r.Fix != "" {
			t += "\nfix: " + r.Fix
		}
		if r.Note != "" {
			t += "\n" + r.Note
		}
		text = append(text, t)
	}
	return &junitFailure{Message: strings.Join(msgs, "; "), Type: class, Text: strings.Join(text, "\n\n")}
}

func waivedText(rs []verdict.Result) string {
	var out []string
	for _, r := range rs {
		if r.Outcome == verdict.Waived {
			out = append(out, "waived: "+r.Note)
		}
	}
	return strings.Join(out, "; ")
}

func warningText(rs []verdict.Result) string {
	var out []string
	for _, r := range rs {
		if r.Outcome == verdict.Warn {
			m := fmt.Sprintf("warning %s [%s]: %s", r.ID, r.Class, r.Message)
			if r.Fix != "" {
				m += " fix: " + r.Fix
			}
			out = append(out, m)
		}
	}
	return strings.Join(out, "\n")
}

func notEvaluated(r ResourceReport) string {
	if len(r.Results) > 0 {
		return "not evaluated: the resource was refused before its rules could run"
	}
	return deferredText(r)
}

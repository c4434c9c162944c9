package policycheck

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/verdict"
)

// Formats lists the output formats.
var Formats = []string{"text", "json", "sarif", "junit"}

// RenderOptions control the output.
type RenderOptions struct {
	Format     string
	FailOnWarn bool
	// FailOnDeferred fails the check on anything checked at apply.
	FailOnDeferred bool
	Version        string // of the CLI, for SARIF's tool descriptor
}

// Render writes the report in the format.
func Render(w io.Writer, rep *Report, o RenderOptions) error {
	bw := bufio.NewWriter(w)
	var err error
	switch o.Format {
	case "", "text":
		err = renderText(bw, rep, o)
	case "json":
		err = renderJSON(bw, rep, o)
	case "sarif":
		err = renderSARIF(bw, rep, o)
	case "junit":
		err = renderJUnit(bw, rep, o)
	default:
		return fmt.Errorf("unknown format %q (want %s)", o.Format, strings.Join(Formats, ", "))
	}
	if err != nil {
		return err
	}
	return bw.Flush()
}

// status sums up a resource: fail, deferred (nothing checked), warn,
// waived or pass.
func status(r ResourceReport) string {
	switch {
	case r.Skipped != "":
		return "skipped"
	case r.Count(verdict.Fail) > 0:
		return "fail"
	case !r.Checked():
		return "deferred"
	case r.Count(verdict.Warn) > 0:
		return "warn"
	case r.Count(verdict.Waived) > 0:
		return "waived"
	}
	return "pass"
}

// skippedText says why a resource was not checked.
func skippedText(r ResourceReport) string {
	if r.Skipped == "" {
		return ""
	}
	return "not checked: " + r.Skipped
}

// deferredText says what is left for apply.
func deferredText(r ResourceReport) string {
	if len(r.Deferred) == 0 {
		return ""
	}
	what := strings.Join(r.Deferred, ", ")
	if !r.Checked() {
		return fmt.Sprintf("checked at apply: %s unknown until apply", what)
	}
	if r.Type == typeTemplate {
		return fmt.Sprintf("partly checked (the built-in rules); the team policies that may read %s are checked at apply: unknown until apply", what)
	}
	return fmt.Sprintf("partly checked (the tenant part); the rest is checked at apply: %s unknown until apply", what)
}

func renderText(w io.Writer, rep *Report, o RenderOptions) error { //nolint:unparam // the signature of every renderer in Render
	s := rep.Summary()
	fmt.Fprintf(w, "sandboxio policy check: %s\n\n", rep.Plan)
	clean := 0
	for _, r := range rep.Resources {
		st := status(r)
		if st == "pass" && len(r.Deferred) == 0 {
			clean++
			continue
		}
		label := map[string]string{"fail": "FAIL", "deferred": "LATER", "warn": "WARN", "waived": "WAIVED", "pass": "PART", "skipped": "SKIP"}[st]
		fmt.Fprintf(w, "%-6s %s (%s)\n", label, r.Address, r.Action)
		if d := skippedText(r); d != "" {
			fmt.Fprintf(w, "       %s\n", d)
		}
		if d := deferredText(r); d != "" {
			fmt.Fprintf(w, "       %s\n", d)
		}
		for _, x := range r.Results {
			level := map[verdict.Outcome]string{verdict.Fail: "error", verdict.Warn: "warning", verdict.Waived: "waived"}[x.Outcome]
			who := "built-in"
			if !x.Builtin {
				who = "team"
			}
			head := x.Class
			if x.Title != "" {
				head += ": " + x.Title
			}
			fmt.Fprintf(w, "       %-8s %s  %s [%s, %s]\n", level, x.ID, head, x.Enforcement, who)
			msg := x.Message
			if x.Attribute != "" {
				msg = x.Attribute + ": " + msg
			}
			fmt.Fprintf(w, "                %s\n", msg)
			if x.Fix != "" {
				fmt.Fprintf(w, "                fix: %s\n", x.Fix)
			}
			if x.Note != "" {
				fmt.Fprintf(w, "                %s\n", x.Note)
			}
		}
	}
	if clean > 0 {
		if clean < len(rep.Resources) {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%d of %d sandboxio resources pass every rule.\n", clean, len(rep.Resources)-s.Skipped)
	}
	if len(rep.Waivers) > 0 {
		fmt.Fprintf(w, "\nwaivers:\n")
		for _, wr := range rep.Waivers {
			line := fmt.Sprintf("  %s: %s, %s", wr.Waiver.Describe(), wr.Status, wr.Detail)
			if wr.Status == verdict.StatusActive {
				line += fmt.Sprintf("; waived %d finding(s)", wr.Used)
			}
			fmt.Fprintln(w, line)
		}
	}
	if len(rep.Resources) == 0 {
		fmt.Fprintf(w, "The plan has no sandboxio resources: nothing was checked.\n")
	}
	fmt.Fprintf(w, "\n%d resource(s): %d refused (%d finding(s)), %d warning(s), %d waived, %d checked at apply, %d not checked\n",
		s.Resources, s.FailedResources, s.Failed, s.Warnings, s.Waived, s.Deferred, s.Skipped)
	switch {
	case rep.PassedWith(o):
		fmt.Fprintln(w, "result: PASS")
	case rep.Passed(o.FailOnWarn):
		fmt.Fprintln(w, "result: FAIL (checked at apply, with --fail-on-deferred)")
	case s.Failed == 0:
		fmt.Fprintln(w, "result: FAIL (warnings, with --fail-on-warn)")
	default:
		fmt.Fprintln(w, "result: FAIL")
	}
	return nil
}

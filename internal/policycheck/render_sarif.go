package policycheck

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/owenrumney/go-sarif/v3/pkg/report/v210/sarif"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/verdict"
)

// SARIF 2.1.0 through go-sarif: one reporting descriptor per rule,
// results located at the resource address through a logical location (a
// plan has no source lines), waived findings as accepted suppressions
// carrying the waiver's reason. go-sarif writes every property the schema
// defaults (rank -1, enabled, empty arrays) explicitly.

const (
	sarifSchema  = "https://json.schemastore.org/sarif-2.1.0.json"
	catalogueURI = "https://github.com/sandboxio/terraform-provider-sandboxio/blob/main/docs/guides/policies.md"
)

// securitySeverity maps severities to the numeric scale code-scanning
// tools sort by.
var securitySeverity = map[string]string{"critical": "9.5", "high": "8.0", "medium": "5.5", "low": "3.0"}

func props(kv map[string]any) *sarif.PropertyBag {
	b := sarif.NewPropertyBag()
	for k, v := range kv {
		b.Add(k, v)
	}
	return b
}

func renderSARIF(w io.Writer, rep *Report, o RenderOptions) error {
	index := map[string]int{}
	run := sarif.NewRunWithInformationURI("sandboxio", catalogueURI)
	driver := run.Tool.Driver
	if o.Version != "" {
		driver.WithVersion(o.Version)
	}
	addRule := func(r RuleDoc) int {
		index[r.ID] = len(driver.Rules)
		driver.AddRule(descriptor(r))
		return index[r.ID]
	}
	for _, r := range rep.Rules {
		if _, dup := index[r.ID]; !dup {
			addRule(r)
		}
	}
	// A finding whose rule is not in the catalogue (a team rule returning a
	// plain message has its package as ID) still gets a descriptor.
	ruleIndex := func(x verdict.Result) int {
		if i, ok := index[x.ID]; ok {
			return i
		}
		return addRule(RuleDoc{Doc: rules.Doc{ID: x.ID, Title: x.Title, Class: x.Class, Fix: x.Fix},
			Package: x.Package, Deny: x.Deny, Builtin: x.Builtin, Enforcement: x.Enforcement, Severity: x.Severity})
	}
	result := func(id string, i int, level, msg, addr string, p map[string]any) *sarif.Result {
		loc := sarif.NewLogicalLocation().WithName(lastName(addr)).WithFullyQualifiedName(addr).WithKind("resource")
		return sarif.NewRuleResult(id).WithRuleIndex(i).WithLevel(level).WithMessage(sarif.NewTextMessage(msg)).
			AddLocation(sarif.NewLocation().WithLogicalLocations([]*sarif.LogicalLocation{loc})).WithProperties(props(p))
	}
	for _, r := range rep.Resources {
		if d := deferredText(r); d != "" {
			level := "note"
			if o.FailOnDeferred {
				level = "error" // it fails the check
			}
			run.AddResult(result(rules.CheckedAtApply, index[rules.CheckedAtApply], level, r.Address+": "+d, r.Address,
				map[string]any{"address": r.Address, "unknown": r.Deferred}))
		}
		if d := skippedText(r); d != "" {
			run.AddResult(result(rules.NotChecked, index[rules.NotChecked], "note", r.Address+": "+d, r.Address,
				map[string]any{"address": r.Address, "type": r.Type, "action": r.Action, "reason": r.Skipped}))
		}
		for _, x := range r.Results {
			level := "error"
			if x.Outcome == verdict.Warn {
				level = "warning"
			}
			msg := x.Message
			if x.Attribute != "" {
				msg = x.Attribute + ": " + msg
			}
			if x.Fix != "" {
				msg += " Fix: " + x.Fix
			}
			p := map[string]any{"address": r.Address, "attribute": x.Attribute, "class": x.Class,
				"enforcement": string(x.Enforcement), "severity": x.Severity, "outcome": string(x.Outcome)}
			if x.Note != "" {
				p["note"] = x.Note
			}
			res := result(x.ID, ruleIndex(x), level, msg, r.Address, p)
			if x.Outcome == verdict.Waived && x.Waiver != nil {
				res.AddSuppression(sarif.NewSuppression().WithKind("external").WithStatus("accepted").
					WithJustification(fmt.Sprintf("%s (waiver %s, expires %s)", x.Waiver.Reason, x.Waiver.Source, x.Waiver.Expires)))
				res.Properties.Add("waiver", waiverJSON(x.Waiver))
			}
			run.AddResult(res)
		}
	}
	s := rep.Summary()
	run.AddInvocation(sarif.NewInvocation().WithExecutionSuccessful(true))
	run.WithProperties(props(map[string]any{"plan": rep.Plan, "passed": rep.PassedWith(o), "waived": s.Waived,
		"checkedAtApply": s.Deferred, "notChecked": s.Skipped}))
	if len(rep.Waivers) > 0 {
		ws := make([]jsonWaiverInfo, len(rep.Waivers))
		for i, wr := range rep.Waivers {
			ws[i] = jsonWaiverInfo{jsonWaiver: waiverJSON(wr.Waiver), Status: wr.Status, Detail: wr.Detail, Used: wr.Used}
		}
		run.Properties.Add("waivers", ws)
	}
	log := sarif.NewReport()
	log.Schema = sarifSchema
	log.AddRun(run)
	// Our own encoder rather than PrettyWrite: it keeps "<" and "&" in
	// messages unescaped and ends the output with a newline.
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(log)
}

func descriptor(r RuleDoc) *sarif.ReportingDescriptor {
	level := "error"
	switch {
	case r.ID == rules.CheckedAtApply:
		level = "note"
	case !r.Enforcement.Mandatory():
		level = "warning"
	}
	title := r.Title
	if title == "" {
		title = r.ID
	}
	why := r.Description
	if why == "" {
		why = title
	}
	help := "Why: " + why
	md := "**Why.** " + why
	if r.Fix != "" {
		help += "\nHow to fix: " + r.Fix
		md += "\n\n**How to fix.** " + r.Fix
	}
	md += fmt.Sprintf("\n\nClass `%s`, %s", r.Class, r.Enforcement)
	if r.Builtin {
		md += ", built-in"
	}
	md += "."
	tags := []string{"security", "sandboxio"}
	if r.Class != "" {
		tags = append(tags, r.Class)
	}
	p := props(map[string]any{"class": r.Class, "enforcement": string(r.Enforcement), "severity": r.Severity,
		"builtin": r.Builtin, "package": r.Package}).WithTags(tags)
	if r.Attribute != "" {
		p.Add("attribute", r.Attribute)
	}
	if s, ok := securitySeverity[r.Severity]; ok {
		p.Add("security-severity", s)
	}
	d := sarif.NewRule(r.ID).WithName(ruleName(title)).
		WithShortDescription(sarif.NewMultiformatMessageString().WithText(title)).
		WithFullDescription(sarif.NewMultiformatMessageString().WithText(why)).
		WithHelp(sarif.NewMultiformatMessageString().WithText(help).WithMarkdown(md)).
		WithDefaultConfiguration(sarif.NewReportingConfiguration().WithLevel(level)).WithProperties(p)
	if r.Builtin {
		d.WithHelpURI(catalogueURI + "#" + strings.ToLower(r.ID))
	}
	return d
}

// ruleName turns a title into the PascalCase identifier SARIF suggests.
func ruleName(title string) string {
	var b strings.Builder
	for _, word := range strings.FieldsFunc(title, func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9')
	}) {
		b.WriteString(strings.ToUpper(word[:1]) + word[1:])
	}
	return b.String()
}

// lastName is the resource's own name with its instance key: the part of
// the address after the last dot outside brackets.
func lastName(addr string) string {
	cut := -1
	forEachOutsideKeys(addr, func(i int, r rune) {
		if r == '.' {
			cut = i
		}
	})
	return addr[cut+1:]
}

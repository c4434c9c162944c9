package policycheck

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/verdict"
)

// SARIF 2.1.0, the subset code-scanning tools read: one reporting
// descriptor per rule, results located at the resource address through a
// logical location (a plan has no source lines), waived findings as
// accepted suppressions carrying the waiver's reason.

const (
	sarifSchema  = "https://json.schemastore.org/sarif-2.1.0.json"
	sarifVersion = "2.1.0"
	catalogueURI = "https://github.com/sandboxio/terraform-provider-sandboxio/blob/main/docs/guides/policies.md"
)

type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool        sarifTool         `json:"tool"`
	Invocations []sarifInvocation `json:"invocations"`
	Results     []sarifResult     `json:"results"`
	Properties  map[string]any    `json:"properties,omitempty"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string            `json:"name"`
	Version        string            `json:"version,omitempty"`
	InformationURI string            `json:"informationUri"`
	Rules          []sarifDescriptor `json:"rules"`
}

type sarifText struct {
	Text     string `json:"text"`
	Markdown string `json:"markdown,omitempty"`
}

type sarifDescriptor struct {
	ID                   string         `json:"id"`
	Name                 string         `json:"name,omitempty"`
	ShortDescription     sarifText      `json:"shortDescription"`
	FullDescription      sarifText      `json:"fullDescription"`
	Help                 sarifText      `json:"help"`
	HelpURI              string         `json:"helpUri,omitempty"`
	DefaultConfiguration sarifConfig    `json:"defaultConfiguration"`
	Properties           map[string]any `json:"properties"`
}

type sarifConfig struct {
	Level string `json:"level"`
}

type sarifInvocation struct {
	ExecutionSuccessful bool `json:"executionSuccessful"`
}

type sarifResult struct {
	RuleID       string             `json:"ruleId"`
	RuleIndex    int                `json:"ruleIndex"`
	Level        string             `json:"level"`
	Message      sarifText          `json:"message"`
	Locations    []sarifLocation    `json:"locations"`
	Suppressions []sarifSuppression `json:"suppressions,omitempty"`
	Properties   map[string]any     `json:"properties,omitempty"`
}

type sarifLocation struct {
	LogicalLocations []sarifLogical `json:"logicalLocations"`
}

type sarifLogical struct {
	Name               string `json:"name"`
	FullyQualifiedName string `json:"fullyQualifiedName"`
	Kind               string `json:"kind"`
}

type sarifSuppression struct {
	Kind          string `json:"kind"`
	Status        string `json:"status"`
	Justification string `json:"justification"`
}

// securitySeverity maps severities to the numeric scale code-scanning
// tools sort by.
var securitySeverity = map[string]string{"critical": "9.5", "high": "8.0", "medium": "5.5", "low": "3.0"}

func renderSARIF(w io.Writer, rep *Report, o RenderOptions) error {
	index := map[string]int{}
	driver := sarifDriver{Name: "sandboxio", Version: o.Version, InformationURI: catalogueURI}
	for _, r := range rep.Rules {
		if _, dup := index[r.ID]; dup {
			continue
		}
		index[r.ID] = len(driver.Rules)
		driver.Rules = append(driver.Rules, descriptor(r))
	}
	// A finding whose rule is not in the catalogue (a team rule returning a
	// plain message has its package as ID) still gets a descriptor.
	ruleIndex := func(x verdict.Result) int {
		if i, ok := index[x.ID]; ok {
			return i
		}
		index[x.ID] = len(driver.Rules)
		driver.Rules = append(driver.Rules, descriptor(RuleDoc{Doc: rules.Doc{ID: x.ID, Title: x.Title, Class: x.Class, Fix: x.Fix},
			Package: x.Package, Deny: x.Deny, Builtin: x.Builtin, Enforcement: x.Enforcement, Severity: x.Severity}))
		return index[x.ID]
	}
	results := []sarifResult{}
	for _, r := range rep.Resources {
		loc := []sarifLocation{{LogicalLocations: []sarifLogical{{Name: lastName(r.Address), FullyQualifiedName: r.Address, Kind: "resource"}}}}
		if d := deferredText(r); d != "" {
			level := "note"
			if o.FailOnDeferred {
				level = "error" // it fails the check
			}
			results = append(results, sarifResult{RuleID: rules.CheckedAtApply, RuleIndex: index[rules.CheckedAtApply],
				Level: level, Message: sarifText{Text: r.Address + ": " + d}, Locations: loc,
				Properties: map[string]any{"address": r.Address, "unknown": r.Deferred}})
		}
		if d := skippedText(r); d != "" {
			results = append(results, sarifResult{RuleID: rules.NotChecked, RuleIndex: index[rules.NotChecked],
				Level: "note", Message: sarifText{Text: r.Address + ": " + d}, Locations: loc,
				Properties: map[string]any{"address": r.Address, "type": r.Type, "action": r.Action, "reason": r.Skipped}})
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
			res := sarifResult{RuleID: x.ID, RuleIndex: ruleIndex(x), Level: level, Message: sarifText{Text: msg}, Locations: loc,
				Properties: map[string]any{"address": r.Address, "attribute": x.Attribute, "class": x.Class,
					"enforcement": string(x.Enforcement), "severity": x.Severity, "outcome": string(x.Outcome)}}
			if x.Note != "" {
				res.Properties["note"] = x.Note
			}
			if x.Outcome == verdict.Waived && x.Waiver != nil {
				res.Suppressions = []sarifSuppression{{Kind: "external", Status: "accepted",
					Justification: fmt.Sprintf("%s (waiver %s, expires %s)", x.Waiver.Reason, x.Waiver.Source, x.Waiver.Expires)}}
				res.Properties["waiver"] = waiverJSON(x.Waiver)
			}
			results = append(results, res)
		}
	}
	s := rep.Summary()
	run := sarifRun{
		Tool: sarifTool{Driver: driver}, Invocations: []sarifInvocation{{ExecutionSuccessful: true}}, Results: results,
		Properties: map[string]any{"plan": rep.Plan, "passed": rep.PassedWith(o), "waived": s.Waived,
			"checkedAtApply": s.Deferred, "notChecked": s.Skipped},
	}
	if len(rep.Waivers) > 0 {
		ws := make([]jsonWaiverInfo, len(rep.Waivers))
		for i, wr := range rep.Waivers {
			ws[i] = jsonWaiverInfo{jsonWaiver: waiverJSON(wr.Waiver), Status: wr.Status, Detail: wr.Detail, Used: wr.Used}
		}
		run.Properties["waivers"] = ws
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(sarifLog{Schema: sarifSchema, Version: sarifVersion, Runs: []sarifRun{run}})
}

func descriptor(r RuleDoc) sarifDescriptor {
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
	props := map[string]any{"tags": tags, "class": r.Class, "enforcement": string(r.Enforcement), "severity": r.Severity,
		"builtin": r.Builtin, "package": r.Package}
	if r.Attribute != "" {
		props["attribute"] = r.Attribute
	}
	if s, ok := securitySeverity[r.Severity]; ok {
		props["security-severity"] = s
	}
	d := sarifDescriptor{ID: r.ID, Name: ruleName(title), ShortDescription: sarifText{Text: title},
		FullDescription: sarifText{Text: why}, Help: sarifText{Text: help, Markdown: md},
		DefaultConfiguration: sarifConfig{Level: level}, Properties: props}
	if r.Builtin {
		d.HelpURI = catalogueURI + "#" + strings.ToLower(r.ID)
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

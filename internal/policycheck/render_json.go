package policycheck

import (
	"encoding/json"
	"io"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/verdict"
)

// The JSON report, version 1. Field names are the contract for scripts.
type jsonReport struct {
	ReportVersion int              `json:"report_version"`
	Plan          string           `json:"plan"`
	Passed        bool             `json:"passed"`
	FailOnWarn    bool             `json:"fail_on_warn"`
	FailOnDefer   bool             `json:"fail_on_deferred"`
	Summary       jsonSummary      `json:"summary"`
	Resources     []jsonResource   `json:"resources"`
	Waivers       []jsonWaiverInfo `json:"waivers"`
}

type jsonSummary struct {
	Resources       int `json:"resources"`
	FailedResources int `json:"failed_resources"`
	Failed          int `json:"failed"`
	Warnings        int `json:"warnings"`
	Waived          int `json:"waived"`
	CheckedAtApply  int `json:"checked_at_apply"`
	NotChecked      int `json:"not_checked"`
}

type jsonResource struct {
	Address  string        `json:"address"`
	Type     string        `json:"type"`
	Action   string        `json:"action"`
	Kind     string        `json:"kind,omitempty"`
	Status   string        `json:"status"` // fail, deferred, warn, waived, pass, skipped
	Skipped  string        `json:"not_checked,omitempty"`
	Deferred []string      `json:"checked_at_apply,omitempty"`
	Note     string        `json:"note,omitempty"`
	Findings []jsonFinding `json:"findings"`
}

type jsonFinding struct {
	Rule        string      `json:"rule"`
	Title       string      `json:"title,omitempty"`
	Class       string      `json:"class"`
	Outcome     string      `json:"outcome"` // fail, warn, waived
	Enforcement string      `json:"enforcement"`
	Severity    string      `json:"severity"`
	Builtin     bool        `json:"builtin"`
	Attribute   string      `json:"attribute,omitempty"`
	Message     string      `json:"message"`
	Fix         string      `json:"fix,omitempty"`
	Waiver      *jsonWaiver `json:"waiver,omitempty"`
	Note        string      `json:"note,omitempty"`
}

type jsonWaiver struct {
	Source  string `json:"source"`
	Rule    string `json:"rule"`
	Address string `json:"address"`
	Reason  string `json:"reason"`
	Expires string `json:"expires"`
}

type jsonWaiverInfo struct {
	jsonWaiver
	Status string `json:"status"` // active, expired, refused
	Detail string `json:"detail"`
	Used   int    `json:"used"`
}

func waiverJSON(w *verdict.Waiver) jsonWaiver {
	return jsonWaiver{Source: w.Source, Rule: w.Rule, Address: w.Address, Reason: w.Reason, Expires: w.Expires}
}

func renderJSON(w io.Writer, rep *Report, o RenderOptions) error {
	s := rep.Summary()
	out := jsonReport{
		ReportVersion: 1, Plan: rep.Plan, Passed: rep.PassedWith(o), FailOnWarn: o.FailOnWarn, FailOnDefer: o.FailOnDeferred,
		Summary: jsonSummary{Resources: s.Resources, FailedResources: s.FailedResources, Failed: s.Failed,
			Warnings: s.Warnings, Waived: s.Waived, CheckedAtApply: s.Deferred, NotChecked: s.Skipped},
		Resources: make([]jsonResource, len(rep.Resources)),
		Waivers:   make([]jsonWaiverInfo, len(rep.Waivers)),
	}
	for i, r := range rep.Resources {
		jr := jsonResource{Address: r.Address, Type: r.Type, Action: r.Action, Kind: r.Kind, Status: status(r),
			Deferred: r.Deferred, Skipped: r.Skipped, Note: deferredText(r) + skippedText(r), Findings: make([]jsonFinding, len(r.Results))}
		for j, x := range r.Results {
			f := jsonFinding{Rule: x.ID, Title: x.Title, Class: x.Class, Outcome: string(x.Outcome),
				Enforcement: string(x.Enforcement), Severity: x.Severity, Builtin: x.Builtin,
				Attribute: x.Attribute, Message: x.Message, Fix: x.Fix, Note: x.Note}
			if x.Waiver != nil {
				wj := waiverJSON(x.Waiver)
				f.Waiver = &wj
			}
			jr.Findings[j] = f
		}
		out.Resources[i] = jr
	}
	for i, wr := range rep.Waivers {
		out.Waivers[i] = jsonWaiverInfo{jsonWaiver: waiverJSON(wr.Waiver), Status: wr.Status, Detail: wr.Detail, Used: wr.Used}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(out)
}

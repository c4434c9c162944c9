package verdict

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/boundedfile"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Waiver is one exception to a soft-mandatory team rule: the rule, the
// resource addresses it covers (a glob), why, and until when.
type Waiver struct {
	Rule    string
	Address string
	Reason  string
	Expires string // as written: a date (valid through that day, UTC) or an RFC 3339 time

	// Source names the waiver in reports: file:line.
	Source string
	// until is the first instant at which the waiver no longer applies.
	until time.Time
}

// Waivers is a parsed waiver file.
type Waivers struct {
	Path string
	List []*Waiver
}

// waiverKeys are the fields of one waiver; anything else is refused, so a
// misspelt "expires" cannot make a waiver permanent.
var waiverKeys = map[string]bool{"rule": true, "address": true, "reason": true, "expires": true}

// LoadWaivers reads a waiver file. YAML and JSON are both accepted (JSON is
// read as the YAML it is). Only a regular file within boundedfile.DefaultLimit
// is read: a device or a FIFO is refused before it is opened.
//
// A file that cannot be read or parsed is refused as SBX-POL-002, with the
// rule catalogue's fix: the provider, `sandboxio policy check` and the
// run-time helper report this error as it is.
func LoadWaivers(path string) (*Waivers, error) {
	data, err := boundedfile.ReadFile(path, boundedfile.DefaultLimit)
	if err != nil {
		return nil, waiversError(fmt.Errorf("waivers: %w", err))
	}
	w, err := ParseWaivers(path, data)
	if err != nil {
		return nil, waiversError(err)
	}
	return w, nil
}

func waiversError(err error) error {
	d, _ := rules.Lookup(rules.WaiversLoad)
	return &model.Error{Class: model.ErrorClass(d.Class), Rule: d.ID, Attribute: d.Attribute, Message: err.Error(), Fix: d.Fix}
}

// ParseWaivers parses a waiver file:
//
//	waivers:
//	  - rule: TEAM-IMG-001
//	    address: sandboxio_template.legacy_*
//	    reason: legacy images move to the internal registry in Q3 (TICKET-123)
//	    expires: 2026-09-30
func ParseWaivers(name string, data []byte) (*Waivers, error) {
	ws := &Waivers{Path: name}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("waivers %s: the file is empty; write a top-level waivers: list", name)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("waivers %s: not YAML or JSON: %w", name, err)
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("waivers %s: the top level must be a mapping with a waivers: list", name)
	}
	top := doc.Content[0]
	var list *yaml.Node
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		switch k.Value {
		case "waivers":
			list = v
		case "version":
			if v.Value != "1" {
				return nil, fmt.Errorf("waivers %s:%d: version %q is not supported (this build reads 1)", name, v.Line, v.Value)
			}
		default:
			return nil, fmt.Errorf("waivers %s:%d: unknown key %q at the top level (want waivers, version)", name, k.Line, k.Value)
		}
	}
	if list == nil || list.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("waivers %s: the top level needs a waivers: list", name)
	}
	var problems []string
	for _, n := range list.Content {
		w, err := parseWaiver(name, n)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		ws.List = append(ws.List, w)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("waivers %s: %s", name, strings.Join(problems, "; "))
	}
	return ws, nil
}

func parseWaiver(file string, n *yaml.Node) (*Waiver, error) {
	w := &Waiver{Source: fmt.Sprintf("%s:%d", file, n.Line)}
	if n.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: a waiver is a mapping of rule, address, reason and expires", n.Line)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !waiverKeys[k.Value] {
			return nil, fmt.Errorf("line %d: unknown waiver field %q (want rule, address, reason, expires)", k.Line, k.Value)
		}
		if v.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("line %d: %s must be a string", v.Line, k.Value)
		}
		s := strings.TrimSpace(v.Value)
		switch k.Value {
		case "rule":
			w.Rule = s
		case "address":
			w.Address = s
		case "reason":
			w.Reason = s
		case "expires":
			w.Expires = s
		}
	}
	var missing []string
	for _, f := range []struct{ name, v string }{{"rule", w.Rule}, {"address", w.Address}, {"reason", w.Reason}, {"expires", w.Expires}} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("line %d: the waiver needs %s (a waiver without an expiry or a reason is a permanent, silent exception)",
			n.Line, strings.Join(missing, ", "))
	}
	until, err := parseExpiry(w.Expires)
	if err != nil {
		return nil, fmt.Errorf("line %d: %w", n.Line, err)
	}
	w.until = until
	return w, nil
}

// parseExpiry reads a date (the waiver holds through that whole day, UTC)
// or an RFC 3339 time.
func parseExpiry(s string) (time.Time, error) {
	if d, err := time.Parse(time.DateOnly, s); err == nil {
		return d.AddDate(0, 0, 1), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("expires %q is not a date (YYYY-MM-DD) or an RFC 3339 time", s)
}

// Until returns the first instant at which the waiver no longer applies.
func (w *Waiver) Until() time.Time { return w.until }

// Describe names the waiver for reports.
func (w *Waiver) Describe() string {
	return fmt.Sprintf("%s (%s for %s)", w.Source, w.Rule, w.Address)
}

// Waiver states.
const (
	StatusActive  = "active"
	StatusExpired = "expired"
	StatusRefused = "refused"
)

// Status says whether the waiver can apply under eng at now, and if not why.
// Only soft-mandatory team rules can be waived: a built-in rule, a
// hard-mandatory one, an advisory one (it never refuses) and an unknown ID
// are refused, and the waiver is reported, never silently dropped.
func (w *Waiver) Status(eng *policy.Engine, now time.Time) (status, detail string) {
	info, ok := eng.Rule(w.Rule)
	// Built-in pre-execution rules are the exception: a team sets their
	// level (exec_enforcement), and a soft-mandatory one can be waived.
	execRule := ok && info.Builtin && info.Decision != ""
	if !execRule && strings.HasPrefix(strings.ToUpper(w.Rule), policy.ReservedIDPrefix) {
		return StatusRefused, fmt.Sprintf("%s is a built-in rule: built-in rules are hard-mandatory and cannot be waived", w.Rule)
	}
	switch {
	case !ok:
		return StatusRefused, fmt.Sprintf("no rule %s is loaded (check the ID and the --policy directories)", w.Rule)
	case info.Builtin && !execRule:
		return StatusRefused, fmt.Sprintf("%s is a built-in rule: built-in rules are hard-mandatory and cannot be waived", w.Rule)
	case info.Enforcement() == policy.HardMandatory:
		return StatusRefused, fmt.Sprintf("%s is hard-mandatory: only soft-mandatory rules can be waived", w.Rule)
	case info.Enforcement() == policy.Advisory:
		return StatusRefused, fmt.Sprintf("%s is advisory: it only warns, so there is nothing to waive", w.Rule)
	}
	if !now.Before(w.until) {
		return StatusExpired, fmt.Sprintf("expired (expires: %s) and no longer applies", w.Expires)
	}
	return StatusActive, fmt.Sprintf("valid until %s", w.Expires)
}

// Package policycheck is `sandboxio policy check`: it reads the JSON of a
// Terraform plan (`terraform show -json`), builds for every sandboxio
// resource the input document the provider builds at plan time (through
// internal/inputs), decides on it through internal/verdict and renders the
// result as text, JSON, SARIF or JUnit.
package policycheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	tfjson "github.com/hashicorp/terraform-json"
)

// plan is the part of `terraform show -json` output the check reads; the
// rest is skipped undecoded. Resources are terraform-json's types with
// their values kept as text until a sandboxio resource needs them
// (planValue decodes them straight into tftypes values); see
// docs/design/policy-check-libraries.md for why not the whole tfjson.Plan.
type plan struct {
	FormatVersion   *string             `json:"format_version"`
	Variables       map[string]variable `json:"variables"`
	PlannedValues   *plannedValues      `json:"planned_values"`
	ResourceChanges []resourceChange    `json:"resource_changes"`
	Configuration   *configuration      `json:"configuration"`
	// Errored is not in tfjson.Plan: Terraform writes it for a plan that
	// failed part way.
	Errored bool `json:"errored"`
	// PriorState holds the data sources Terraform read while planning:
	// they are in neither resource_changes nor planned_values.
	PriorState *priorState `json:"prior_state"`
	// DeferredChanges are changes Terraform left for a later plan
	// (deferred actions): reported, never decided on.
	DeferredChanges []deferredChange `json:"deferred_changes"`
}

// priorState is not a tfjson.State: that one requires its own
// format_version, which a plan's prior_state need not hold.
type priorState struct {
	Values *struct {
		RootModule *module `json:"root_module"`
	} `json:"values"`
}

// deferredChange is a tfjson.DeferredResourceChange whose change keeps its
// values as text (they are never read).
type deferredChange struct {
	Reason         string          `json:"reason"`
	ResourceChange *resourceChange `json:"resource_change"`
}

type variable struct {
	Value json.RawMessage `json:"value"`
}

type plannedValues struct {
	RootModule *module `json:"root_module"`
}

// module is a tfjson.StateModule of resources whose values stay text.
type module struct {
	Address      string     `json:"address"`
	Resources    []resource `json:"resources"`
	ChildModules []module   `json:"child_modules"`
}

// resource is a tfjson.StateResource; Values shadows its
// AttributeValues, which would decode them into a map[string]any.
type resource struct {
	tfjson.StateResource
	Values jsonText `json:"values"`
}

// resourceChange is a tfjson.ResourceChange; Change shadows its Change,
// which would decode the values into a map[string]any.
type resourceChange struct {
	tfjson.ResourceChange
	Change *struct {
		Actions      tfjson.Actions `json:"actions"`
		After        jsonText       `json:"after"`
		AfterUnknown jsonText       `json:"after_unknown"`
	} `json:"change"`
}

// jsonText is a JSON value kept as text, as json.RawMessage keeps it as
// bytes: planValue and readMask decode it, and take substrings of it as
// strings (one copy of the text, not two).
type jsonText string

// UnmarshalJSON keeps the value's text; encoding/json has checked it.
func (t *jsonText) UnmarshalJSON(b []byte) error {
	*t = jsonText(b)
	return nil
}

type configuration struct {
	ProviderConfig map[string]providerConfig `json:"provider_config"`
	RootModule     *configModule             `json:"root_module"`
}

type providerConfig struct {
	Name        string                `json:"name"`
	Expressions map[string]expression `json:"expressions"`
}

type expression struct {
	ConstantValue json.RawMessage `json:"constant_value"`
	References    []string        `json:"references"`
}

type configModule struct {
	Resources   []configResource      `json:"resources"`
	ModuleCalls map[string]moduleCall `json:"module_calls"`
}

type configResource struct {
	Address           string `json:"address"`
	ProviderConfigKey string `json:"provider_config_key"`
}

type moduleCall struct {
	Module *configModule `json:"module"`
}

// InputError is a plan that cannot be read: the CLI exits 2 on it.
type InputError struct {
	File string
	Msg  string
}

func (e *InputError) Error() string { return e.File + ": " + e.Msg }

// parsePlan decodes and validates plan JSON. Every failure is an
// *InputError that says what is wrong and where. The top-level keys are
// read exactly (encoding/json alone would also take "Format_Version"), and
// no object, at any depth, may hold a key twice (checkKeys).
func parsePlan(name string, data []byte) (*plan, error) {
	fail := func(format string, args ...any) error {
		return &InputError{File: name, Msg: fmt.Sprintf(format, args...)}
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, fail("the file is empty; write the plan with `terraform show -json tfplan > %s`", name)
	}
	if trimmed[0] != '{' {
		return nil, fail("not a Terraform plan: the JSON must be an object, and the file starts with %q", firstRune(trimmed))
	}
	if err := checkKeys(data); err != nil {
		return nil, fail("%s", err)
	}
	type section struct {
		raw   json.RawMessage
		start int64
	}
	sections := map[string]section{}
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil {
		return nil, fail("%s", describeJSONError(data, 0, "", err))
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fail("%s", describeJSONError(data, 0, "", err))
		}
		key, _ := tok.(string)
		start := dec.InputOffset()
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fail("%s", describeJSONError(data, 0, "", err))
		}
		sections[key] = section{raw, start}
	}
	if _, err := dec.Token(); err != nil {
		return nil, fail("%s", describeJSONError(data, 0, "", err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fail("trailing data after the plan's JSON object at byte %d (two documents concatenated?)", dec.InputOffset())
	}
	var p plan
	for key, dst := range map[string]any{
		"format_version": &p.FormatVersion, "variables": &p.Variables, "planned_values": &p.PlannedValues,
		"resource_changes": &p.ResourceChanges, "configuration": &p.Configuration, "errored": &p.Errored,
		"prior_state": &p.PriorState, "deferred_changes": &p.DeferredChanges,
	} {
		sec, ok := sections[key]
		if !ok {
			continue
		}
		if err := json.Unmarshal(sec.raw, dst); err != nil {
			return nil, fail("%s", describeJSONError(data, sec.start, key, err))
		}
	}
	_, isState := sections["values"]
	if p.FormatVersion == nil {
		if isState {
			return nil, fail("this is the JSON of a state, not of a plan; run `terraform plan -out=tfplan` and pass `terraform show -json tfplan`")
		}
		return nil, fail("not a Terraform plan: there is no format_version (is it `terraform show -json` output of a plan file?)")
	}
	// Not tfjson.Plan.Validate: it takes 0.x too (TestParsePlan_FormatVersion).
	if major, _, _ := strings.Cut(*p.FormatVersion, "."); major != "1" {
		return nil, fail("plan format_version %q is not supported (this build reads 1.x)", *p.FormatVersion)
	}
	if p.PlannedValues == nil && p.ResourceChanges == nil {
		if isState {
			return nil, fail("this is the JSON of a state, not of a plan; run `terraform plan -out=tfplan` and pass `terraform show -json tfplan`")
		}
		return nil, fail("not a Terraform plan: neither planned_values nor resource_changes is present")
	}
	if p.Errored {
		return nil, fail("the plan errored (\"errored\": true); fix the errors `terraform plan` reported and check the new plan")
	}
	for i, rc := range p.ResourceChanges {
		if rc.Address == "" || rc.Type == "" || rc.Change == nil {
			return nil, fail("resource_changes[%d] lacks an address, a type or a change", i)
		}
	}
	for i, dc := range p.DeferredChanges {
		if rc := dc.ResourceChange; rc == nil || rc.Address == "" || rc.Type == "" {
			return nil, fail("deferred_changes[%d] lacks a resource_change with an address and a type", i)
		}
	}
	return &p, nil
}

// describeJSONError turns a decoding error into a message with a line and
// column: "unexpected end of JSON input" alone does not say which file
// was truncated where.
func describeJSONError(data []byte, base int64, section string, err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		line, col := position(data, int64(len(data)))
		return fmt.Sprintf("the JSON ends early at line %d, column %d: the file is truncated", line, col)
	case errors.As(err, &syn):
		line, col := position(data, base+syn.Offset)
		return fmt.Sprintf("invalid JSON at line %d, column %d: %v", line, col, syn)
	case errors.As(err, &typ):
		line, col := position(data, base+typ.Offset)
		field := section
		if typ.Field != "" {
			field += "." + embedded.Replace(typ.Field)
		}
		return fmt.Sprintf("not a Terraform plan: %s holds a JSON %s where a plan has %s (line %d, column %d)",
			field, typ.Value, jsonKind(typ.Type.Kind().String()), line, col)
	}
	return "invalid JSON: " + err.Error()
}

// embedded drops the names of the embedded tfjson types, which
// encoding/json puts in an error's field path between JSON keys.
var embedded = strings.NewReplacer("ResourceChange.", "", "StateResource.", "")

func jsonKind(goKind string) string {
	switch goKind {
	case "struct", "map":
		return "an object"
	case "slice", "array":
		return "an array"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "ptr", "interface":
		return "another type"
	}
	return "a number"
}

func position(data []byte, offset int64) (line, col int) {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	line, col = 1, 1
	for _, b := range data[:offset] {
		if b == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}

func firstRune(b []byte) string {
	s := string(b)
	for _, r := range s {
		return string(r)
	}
	return ""
}

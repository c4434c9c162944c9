package policycheck

import (
	"slices"
	"strings"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/verdict"
)

const imageRule = `package team.images

import data.sandboxio.lib

# METADATA
# title: unapproved image
# description: images come from the internal registry
# custom:
#   id: TEAM-IMG-001
#   class: ConfigurationError
#   attribute: image
#   severity: high
#   enforcement: hard-mandatory
#   fix: use registry.internal/...
deny contains f if {
	input.kind == "template"
	not startswith(input.template.image, "registry.internal/")
	f := lib.finding(rego.metadata.rule(), "unapproved image")
}
`

// An image or an env value unknown until apply is decided with
// placeholders, as the provider decides at plan (inputs.ReadTemplate): the
// built-in rules decide now; a team rule that reads the image waits for
// apply, and the report says so. A value a rule decides on (the network)
// leaves the whole template to apply.
func TestCheck_UnknownDecisionFreeValuesDecided(t *testing.T) {
	unknownImage := templateChange("img", map[string]any{"image": nil, "network": map[string]any{"egress": "allow", "allow": []any{}}})
	unknownImage.unknown = map[string]any{"image": true, "spec": true}
	unknownEnv := templateChange("env", map[string]any{"env": map[string]any{"HOST": nil, "LANG": "C"}})
	unknownEnv.unknown = map[string]any{"env": map[string]any{"HOST": true}}
	unknownNet := templateChange("net", map[string]any{"network": nil})
	unknownNet.unknown = map[string]any{"network": true}
	data := planJSON(t, "docker://", unknownImage, unknownEnv, unknownNet)

	rep, err := Check(t.Context(), builtinEngine(t), "plan.json", data, Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	byAddr := map[string]ResourceReport{}
	for _, r := range rep.Resources {
		byAddr[r.Address] = r
	}
	img := byAddr["sandboxio_template.img"]
	if img.Kind != "template" || len(img.Deferred) != 0 || img.Count(verdict.Warn) != 1 || img.Results[0].ID != "SBX-NET-007" {
		t.Errorf("unknown image: kind %q, deferred %v, results %+v; want decided, with the open-egress warning", img.Kind, img.Deferred, img.Results)
	}
	if env := byAddr["sandboxio_template.env"]; env.Kind != "template" || len(env.Deferred) != 0 || len(env.Results) != 0 {
		t.Errorf("unknown env value: kind %q, deferred %v, results %+v; want decided and accepted", env.Kind, env.Deferred, env.Results)
	}
	if net := byAddr["sandboxio_template.net"]; net.Kind != "" || !slices.Equal(net.Deferred, []string{"network"}) {
		t.Errorf("unknown network: kind %q, deferred %v; want checked at apply for network", net.Kind, net.Deferred)
	}

	// A team rule reading the image: set aside until apply, not decided on
	// the placeholder; built-in findings stand.
	rep, err = Check(t.Context(), teamEngine(t, map[string]string{"images.rego": imageRule}), "plan.json", data, Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Resources {
		switch r.Address {
		case "sandboxio_template.img":
			if r.Count(verdict.Fail) != 0 || !slices.Equal(r.Deferred, []string{"image"}) || r.Count(verdict.Warn) != 1 {
				t.Errorf("unknown image, team rule: deferred %v, results %+v; want the team rule left to apply", r.Deferred, r.Results)
			}
			if txt := deferredText(r); !strings.Contains(txt, "team policies") || !strings.Contains(txt, "image") {
				t.Errorf("deferred text %q", txt)
			}
		case "sandboxio_template.env":
			// the image is known there: the team rule decides
			if r.Count(verdict.Fail) != 1 || r.Results[0].ID != "TEAM-IMG-001" {
				t.Errorf("known image, team rule: %+v", r.Results)
			}
		}
	}
}

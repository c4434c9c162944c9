package policycheck

import (
	"regexp"
	"strings"
	"testing"

	tfjson "github.com/hashicorp/terraform-json"
)

// The check reads format_version 1.x, as before terraform-json; it does not
// take tfjson.Plan's own check (>= 0.1, < 2.0, semver), which accepts the
// 0.x plans of Terraform 0.12-0.14 this reader was never written for and
// refuses a 1.x it cannot parse as a version. Terraform writes neither.
func TestParsePlan_FormatVersion(t *testing.T) {
	for _, tc := range []struct {
		version string
		read    bool // by this check
		tfjson  bool // by tfjson.Plan.Validate
	}{
		{"1.0", true, true},
		{"1.2", true, true},
		{"1", true, true},
		{"1.x", true, false},
		{"0.2", false, true},
		{"2.0", false, false},
		{"", false, false},
	} {
		_, err := parsePlan("plan.json", []byte(`{"format_version":"`+tc.version+`","planned_values":{}}`))
		if (err == nil) != tc.read {
			t.Errorf("format_version %q: read %v, want %v (%v)", tc.version, err == nil, tc.read, err)
		}
		if err != nil && !strings.Contains(err.Error(), "is not supported (this build reads 1.x)") {
			t.Errorf("format_version %q: %v", tc.version, err)
		}
		if tfErr := (&tfjson.Plan{FormatVersion: tc.version}).Validate(); (tfErr == nil) != tc.tfjson {
			t.Errorf("format_version %q: tfjson accepts %v, want %v: the table is out of date", tc.version, tfErr == nil, tc.tfjson)
		}
	}
}

var arrayIndex = regexp.MustCompile(`\.[0-9]+\.`)

// A type error in a field of tfjson's types is named by its JSON path, without
// the Go names of the embedded types.
func TestParsePlan_TypeErrorPath(t *testing.T) {
	for src, want := range map[string]string{
		`{"format_version":"1.2","planned_values":{"root_module":{"resources":[{"address":"a","type":"x","tainted":"x"}]}}}`: "planned_values.root_module.resources.tainted holds a JSON string",
		`{"format_version":"1.2","resource_changes":[{"address":1}]}`:                                                        "resource_changes.address holds a JSON number",
	} {
		_, err := parsePlan("plan.json", []byte(src))
		// Newer Go names array elements in the path (resources.0.tainted).
		if err == nil || !strings.Contains(arrayIndex.ReplaceAllString(err.Error(), "."), want) {
			t.Errorf("%s: got %v, want %q", src, err, want)
		}
	}
}

package policy_test

import (
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/policy"
)

// TeamReads says whether a team rule may read an input path, erring on the
// side of yes: the provider drops team findings at plan when it may.
func TestTeamReads(t *testing.T) {
	image := []string{"template", "image"}
	env := []string{"template", "env"}
	for name, tc := range map[string]struct {
		src  string
		want bool
	}{
		"reads the image": {`package team.x
deny contains "x" if startswith(input.template.image, "docker.io/")
`, true},
		"through an import alias": {`package team.x
import input.template as tpl
deny contains "x" if tpl.image == "x"
`, true},
		"through a bound part": {`package team.x
deny contains "x" if {
	t := input.template
	t.image == "x"
}
`, true},
		"a computed key": {`package team.x
deny contains k if {
	some k, v in input.template
	v == "x"
}
`, true},
		"the whole document": {`package team.x
deny contains "x" if walk(input, [_, "x"])
`, true},
		"through a built-in package that reads it": {`package team.x
deny contains m if m := data.sandboxio.resources.template_ref
`, true},
		"other attributes only": {`package team.x
import data.sandboxio.lib
deny contains f if {
	input.backend.scheme == "docker"
	input.template.name == "x"
	input.resources.memory_mb > 4096
	f := lib.finding(rego.metadata.rule(), sprintf("%s", [lib.backend_key]))
}
`, false},
		"that a value is there": {`package team.x
deny contains "x" if {
	input.template
	not input.template.image
}
`, false},
		"a key read from it": {`package team.x
deny contains "x" if input.template.labels[input.template.image]
`, true},
		"another element of a list": {`package team.x
deny contains "x" if input.template.secret_names[0] == "X"
`, false},
	} {
		t.Run(name, func(t *testing.T) {
			e, err := loadTeam(t, map[string]string{"p.rego": tc.src})
			if err != nil {
				t.Fatal(err)
			}
			if got := e.TeamReads(image); got != tc.want {
				t.Errorf("TeamReads(template.image) = %v, want %v", got, tc.want)
			}
			if got := e.TeamReads(image); got != tc.want {
				t.Errorf("cached TeamReads(template.image) = %v, want %v", got, tc.want)
			}
		})
	}

	// The example team policies, loaded together: the registries rule
	// reads the image, the memory rule does not, and neither reads env.
	e, err := policy.New(t.Context(), []string{"../../examples/policies"})
	if err != nil {
		t.Fatal(err)
	}
	if !e.PackageReads("team.registries", image) || e.PackageReads("team.memory", image) || !e.TeamReads(image) {
		t.Errorf("examples: registries reads the image: %v, memory: %v, any team package: %v; want true, false, true",
			e.PackageReads("team.registries", image), e.PackageReads("team.memory", image), e.TeamReads(image))
	}
	if e.TeamReads(env) {
		t.Error("examples: no team package reads env, TeamReads says one may")
	}
	// The built-in package that names the image in a message.
	if !e.PackageReads("sandboxio.resources", image) || e.PackageReads("sandboxio.network", image) {
		t.Error("built-in packages: sandboxio.resources names the image, sandboxio.network does not")
	}

	// No team policies: nothing to drop.
	e, err = policy.Shared(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.TeamReads(image) {
		t.Error("the built-in bundle alone: TeamReads = true")
	}
}

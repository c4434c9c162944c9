package policy

// Every backend of this build registers itself with the backends registry
// here, once: every user of the engine (the provider, the CLI, the run-time
// helper) parses DSNs, builds input documents and opens sandboxes through
// the same registrations.
import (
	"context"
	"sync"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	_ "github.com/sandboxio/terraform-provider-sandboxio/internal/backends/all"
)

func init() { backends.SetCatalogue(builtinRuleText) }

// builtinEngine is the embedded bundle alone, compiled on first use: a
// backend's backstop reads the catalogue's text of a rule from it.
var builtinEngine = sync.OnceValues(func() (*Engine, error) { return Shared(context.Background(), nil) })

// builtinRuleText is the rule catalogue's text of a built-in rule, from its
// METADATA.
func builtinRuleText(id string) (backends.RuleText, bool) {
	e, err := builtinEngine()
	if err != nil {
		return backends.RuleText{}, false
	}
	r, ok := e.Rule(id)
	if !ok || !r.Builtin {
		return backends.RuleText{}, false
	}
	return backends.RuleText{Title: r.Title, Class: r.Class, Attribute: r.Attribute, Fix: r.Fix}, true
}

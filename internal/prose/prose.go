// Package prose renders the lists of backends and capabilities that the docs,
// schema descriptions and fix texts name, from the capability data
// (policies/capabilities/data.json). A text names a list as ${NAME} or
// ${NAME|or}, which policies.Expand and the Rego rules fill from the data's
// "prose" section; `go generate` writes that section (scripts/prose) and fills
// the <!--list:NAME--> regions of README.md and templates/. Why:
// docs/design/prose-from-data.md.
package prose

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
	"github.com/sandboxio/terraform-provider-sandboxio/policies"
)

// Name is how a backend is called in prose, and its DSN form.
type Name struct {
	Backend string `json:"backend"`
	Name    string `json:"name"`
	DSN     string `json:"dsn"`
}

var names = sync.OnceValue(func() []Name {
	b, err := policies.Bundle.ReadFile(policies.CapabilitiesPath)
	if err != nil {
		panic(err) // embedded at build time
	}
	var d struct {
		Names []Name `json:"backend_names"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		panic(fmt.Errorf("capabilities decode: %w", err))
	}
	return d.Names
})

// Names lists the backends in the order prose names them.
func Names() []Name { return slices.Clone(names()) }

// capName is how the cap lists call a cap.
var capName = map[string]string{"cpu": "cpu", "memory_mb": "memory", "disk_mb": "disk", "pids": "process"}

// lists are the named lists: each picks capability descriptors. A backend
// with runtimes is named alone when all of them are picked, else with the
// runtimes picked ("Docker with runc").
var lists = map[string]func(backends.Capabilities) bool{
	"backends":          func(backends.Capabilities) bool { return true },
	"allowlist":         func(c backends.Capabilities) bool { return c.Network.Allowlist },
	"no_allowlist":      func(c backends.Capabilities) bool { return !c.Network.Allowlist },
	"open_egress":       func(c backends.Capabilities) bool { return c.Network.OpenEgress },
	"learn":             func(c backends.Capabilities) bool { return c.BlockedEgressReporting },
	"warm_pool":         func(c backends.Capabilities) bool { return c.WarmPool },
	"tenant_storage":    func(c backends.Capabilities) bool { return c.TenantStorage },
	"no_tenant_storage": func(c backends.Capabilities) bool { return !c.TenantStorage },
	"max_lifetime":      func(c backends.Capabilities) bool { return c.MaxLifetimeSeconds > 0 },
	"absolute_lifetime": func(c backends.Capabilities) bool { return c.LifetimeEnforcement == "absolute" },
	"idle_lifetime":     func(c backends.Capabilities) bool { return c.LifetimeEnforcement == "idle" },
	"memory_swap": func(c backends.Capabilities) bool {
		return c.Caps.Mode != backends.CapsNone && c.Caps.MemoryBoundsSwap
	},
	"caps_template":    func(c backends.Capabilities) bool { return c.Caps.Mode == backends.CapsTemplate },
	"caps_per_sandbox": func(c backends.Capabilities) bool { return c.Caps.Mode == backends.CapsPerSandbox },
	"domain_allowlist": func(c backends.Capabilities) bool {
		return c.Network.Allowlist && slices.Contains(c.Network.AllowKinds, "domain")
	},
	"allow_ports":   func(c backends.Capabilities) bool { return c.Network.Allowlist && c.Network.AllowPorts },
	"secret_broker": func(c backends.Capabilities) bool { return c.Network.SecretBroker },
}

func init() {
	for _, t := range model.Tiers {
		tier := t
		lists["tier_"+string(t)] = func(c backends.Capabilities) bool { return c.Tier == tier }
	}
}

// entries renders the descriptors pick selects, in Names order.
func entries(pick func(backends.Capabilities) bool) []string {
	var out []string
	for _, n := range names() {
		var all, picked []backends.Capabilities
		for _, key := range backends.Keys() {
			c, _ := backends.Lookup(key)
			if c.Backend != n.Backend {
				continue
			}
			all = append(all, c)
			if pick(c) {
				picked = append(picked, c)
			}
		}
		switch {
		case len(picked) == 0:
		case len(picked) == len(all):
			out = append(out, n.Name)
		default:
			out = append(out, n.Name+" with "+join(runtimes(picked), "or"))
		}
	}
	return out
}

// runtimes lists the descriptors' runtimes by tier, lowest first. A
// variant (runc+gateway) is named only when its plain runtime is not picked
// too: "runc through the egress gateway (`docker://?egress=gateway`)".
func runtimes(cs []backends.Capabilities) []string {
	sort.SliceStable(cs, func(i, j int) bool { return rank(cs[i].Tier) < rank(cs[j].Tier) })
	plain := map[string]bool{}
	for _, c := range cs {
		if c.Variant == "" {
			plain[c.Runtime] = true
		}
	}
	var out []string
	for _, c := range cs {
		switch {
		case c.Variant == "":
			out = append(out, c.Runtime)
		case !plain[c.Runtime]:
			out = append(out, c.Runtime+variantLabel[c.Variant])
		}
	}
	return out
}

// variantLabel is how prose names a capability variant after its runtime.
var variantLabel = map[string]string{
	"gateway": " through the egress gateway (`docker://?egress=gateway`)",
}

func rank(t model.Tier) int { r, _ := t.Rank(); return r }

// join renders [a b c] as "a, b and c" (or "a, b or c").
func join(items []string, conj string) string {
	switch len(items) {
	case 0:
		return "none"
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " " + conj + " " + items[len(items)-1]
}

// items returns the entries of a named list, before joining.
func items(name string) ([]string, bool) {
	switch name {
	case "schemes":
		var out []string
		for _, n := range names() {
			out = append(out, n.Backend)
		}
		return out, true
	case "dsns":
		var out []string
		for _, n := range names() {
			out = append(out, "`"+n.DSN+"`")
		}
		return out, true
	case "docker_runtimes":
		var cs []backends.Capabilities
		for _, key := range backends.Keys() {
			if c, _ := backends.Lookup(key); c.Backend == "docker" && c.Variant == "" {
				cs = append(cs, c)
			}
		}
		sort.SliceStable(cs, func(i, j int) bool { return rank(cs[i].Tier) < rank(cs[j].Tier) })
		var out []string
		for _, c := range cs {
			out = append(out, fmt.Sprintf("%s (%s)", c.Runtime, c.Tier))
		}
		return out, true
	case "caps_unset":
		return capsUnset(), true
	case "backend_guides":
		var out []string
		for _, n := range names() {
			out = append(out, "["+n.Name+"](docs/guides/backend-"+n.Backend+".md)")
		}
		return out, true
	}
	pick, ok := lists[name]
	if !ok {
		return nil, false
	}
	return entries(pick), true
}

// capsUnset groups the backends that set caps per sandbox by the caps they
// cannot set: "Modal and Vercel set no disk or process cap".
func capsUnset() []string {
	var order []string
	groups := map[string][]string{}
	for _, n := range names() {
		for _, key := range backends.Keys() {
			c, _ := backends.Lookup(key)
			if c.Backend != n.Backend || c.Caps.Mode != backends.CapsPerSandbox {
				continue
			}
			var missing []string
			for _, cp := range []string{"cpu", "memory_mb", "disk_mb", "pids"} {
				if !slices.Contains(c.Caps.Settable, cp) {
					missing = append(missing, capName[cp])
				}
			}
			if len(missing) == 0 {
				continue
			}
			g := join(missing, "or")
			if _, seen := groups[g]; !seen {
				order = append(order, g)
			}
			if !slices.Contains(groups[g], n.Name) {
				groups[g] = append(groups[g], n.Name)
			}
		}
	}
	out := make([]string, len(order))
	for i, g := range order {
		verb := " no "
		if i == 0 {
			verb = " set no "
		}
		out[i] = join(groups[g], "and") + verb + g + " cap"
	}
	return out
}

// Render returns a list by its placeholder name: NAME or NAME|or.
func Render(ref string) (string, bool) {
	name, conj, _ := strings.Cut(ref, "|")
	if conj == "" {
		conj = "and"
	}
	if conj != "and" && conj != "or" {
		return "", false
	}
	it, ok := items(name)
	if !ok {
		return "", false
	}
	if name == "caps_unset" {
		return strings.Join(it, ", "), true
	}
	return join(it, conj), true
}

// Refs lists every list name (without |or), sorted.
func Refs() []string {
	out := []string{"schemes", "dsns", "docker_runtimes", "caps_unset", "backend_guides"}
	for name := range lists {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Lists renders every list both ways, keyed as the placeholders name them
// (NAME and NAME|or): the "prose" section of the capability data.
func Lists() map[string]string {
	out := map[string]string{}
	for _, name := range Refs() {
		for _, ref := range []string{name, name + "|or"} {
			if s, ok := Render(ref); ok {
				out[ref] = s
			}
		}
	}
	return out
}

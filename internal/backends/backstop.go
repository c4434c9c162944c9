package backends

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
	"github.com/sandboxio/terraform-provider-sandboxio/policies"
)

// The policy bundle decides what is refused; a backend does not restate a
// rule. Its pre-flight still checks, before creating anything, what it
// relies on (defence in depth), and when it finds something the policy
// should have refused it raises one error, Backstop: the policy accepted a
// configuration this backend cannot enforce. The error names the rule and
// carries the rule catalogue's text (the Rego METADATA), never the
// backend's own wording.

// PolicyGapPrefix starts the message of every Backstop error.
const PolicyGapPrefix = "the policy accepted a configuration "

// RuleText is what the rule catalogue says of one rule.
type RuleText struct {
	Title     string
	Class     string
	Attribute string
	Fix       string
}

// builtinRules is the catalogue of the embedded bundle's rules, read from
// their METADATA (title, and the custom id, class, attribute and fix), the
// same annotations policy.Engine.Rules reports; a test in the policy
// package holds the two equal. It is read here, below the engine, so that a
// backend's own tests see the catalogue's text too.
var builtinRules = sync.OnceValue(func() map[string]RuleText {
	m := map[string]RuleText{}
	files, _ := fs.Glob(policies.Bundle, "*.rego")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.rego") {
			continue
		}
		src, err := policies.Bundle.ReadFile(f)
		if err != nil {
			continue
		}
		mod, err := ast.ParseModuleWithOpts(f, string(src), ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true})
		if err != nil {
			continue // the engine refuses a broken bundle at load
		}
		for _, a := range mod.Annotations {
			id, _ := a.Custom["id"].(string)
			if id == "" {
				continue
			}
			t := RuleText{Title: a.Title}
			t.Class, _ = a.Custom["class"].(string)
			t.Attribute, _ = a.Custom["attribute"].(string)
			fix, _ := a.Custom["fix"].(string)
			t.Fix = policies.Expand(fix) // as the findings carry it
			m[id] = t
		}
	}
	return m
})

// LookupRule returns the catalogue's text of a built-in rule.
func LookupRule(id string) (RuleText, bool) {
	t, ok := builtinRules()[id]
	return t, ok
}

// Backstop returns the error a backend raises when its pre-flight finds a
// configuration that rule should have refused. found says what the backend
// found, in its own terms (values, not advice); attribute is the attribute
// concerned, used where the catalogue names none.
func Backstop(backend, rule, attribute, found string) *model.Error {
	return RuleRefusal(rule, attribute, fmt.Sprintf("%sthe %s backend cannot enforce (%s)", PolicyGapPrefix, backend, found))
}

// RuleRefusal is a refusal under a policy rule made where no input document
// is evaluated (a lookup of the capability data, say): the message is what
// was found followed by the catalogue's title, the fix is the catalogue's.
func RuleRefusal(rule, attribute, found string) *model.Error {
	t, ok := LookupRule(rule)
	if !ok {
		t = RuleText{Title: "rule " + rule, Fix: "see " + rule + " in the rule catalogue (docs/guides/policies.md)"}
	}
	class := model.ErrConfiguration
	for _, c := range model.ErrorClasses {
		if string(c) == t.Class {
			class = c
		}
	}
	if attribute == "" {
		attribute = t.Attribute
	}
	return &model.Error{Class: class, Rule: rule, Attribute: attribute, Message: found + ": " + t.Title, Fix: t.Fix}
}

// BackstopOf turns a refusal made by the domain model's conversions (caps
// out of range, timeouts no bound) into a Backstop error of the same rule.
// Anything without a rule is returned unchanged.
func BackstopOf(backend string, err error) error {
	var me *model.Error
	if !errors.As(err, &me) || me.Rule == "" {
		return err
	}
	return Backstop(backend, me.Rule, me.Attribute, "the value of "+me.Attribute+" is outside what it can apply")
}

// IsPolicyGap reports whether err is a Backstop error.
func IsPolicyGap(err error) bool {
	var me *model.Error
	return errors.As(err, &me) && strings.HasPrefix(me.Message, PolicyGapPrefix)
}

// RuleWarning is a warning of a rule the policy bundle raises (such as
// open egress) that a backend repeats about one sandbox once it exists: its
// text is the catalogue's.
func RuleWarning(class model.WarningClass, rule, attribute string) model.Warning {
	t, ok := LookupRule(rule)
	if !ok {
		t = RuleText{Title: "rule " + rule, Fix: "see " + rule + " in the rule catalogue (docs/guides/policies.md)"}
	}
	return model.Warning{Class: class, Rule: rule, Attribute: attribute, Message: t.Title, Fix: t.Fix}
}

// NoBroker is the Backstop of a spec with brokered secrets on a backend
// (or runtime) where no broker runs. Failing closed matters here: the only
// other place for the value would be the sandbox's environment, which is
// what brokering keeps it from.
func NoBroker(backend string, s model.Spec) error {
	if len(s.BrokeredSecrets) == 0 {
		return nil
	}
	return Backstop(backend, rules.SecNoBroker, "brokered_secrets",
		fmt.Sprintf("%d brokered secret(s), and no broker runs here", len(s.BrokeredSecrets)))
}

// CheckLiveTier backstops the isolation requirement against the tier the
// live backend gives, which the policy could only check against the
// capability data: a runtime registered on the daemon may be weaker than
// its name claims.
func CheckLiveTier(backend string, required, live model.Tier, runtime string) error {
	if required == "" || live.Satisfies(required) {
		return nil
	}
	found := fmt.Sprintf("the live backend gives tier %s, %s is required", live, required)
	if runtime != "" {
		found = fmt.Sprintf("the live backend gives tier %s for runtime %s, %s is required", live, runtime, required)
	}
	return Backstop(backend, rules.IsoBelow, "require_isolation", found)
}

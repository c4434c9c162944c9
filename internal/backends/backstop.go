package backends

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
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

var catalogue atomic.Pointer[func(id string) (RuleText, bool)]

// SetCatalogue installs the lookup of the rule catalogue. The policy
// engine installs the embedded bundle's METADATA; until then (in a
// backend's own unit tests) Backstop names the rule and points at the
// catalogue.
func SetCatalogue(f func(id string) (RuleText, bool)) { catalogue.Store(&f) }

// LookupRule returns the catalogue's text of a rule.
func LookupRule(id string) (RuleText, bool) {
	if f := catalogue.Load(); f != nil {
		return (*f)(id)
	}
	return RuleText{}, false
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
		t = RuleText{Title: "rule " + rule, Fix: "see " + rule + " in the rule catalogue (docs/policies.md)"}
	}
	class := model.ConfigurationError
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
		t = RuleText{Title: "rule " + rule, Fix: "see " + rule + " in the rule catalogue (docs/policies.md)"}
	}
	return model.Warning{Class: class, Rule: rule, Attribute: attribute, Message: t.Title, Fix: t.Fix}
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
	return Backstop(backend, "SBX-ISO-003", "require_isolation", found)
}

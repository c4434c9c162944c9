package verdict

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// A waiver file that is a FIFO or a device is refused without being read:
// the provider, the run-time helper and policy check all load waivers here.
func TestLoadWaivers_RegularFilesOnly(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "waivers.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, "/dev/zero"} {
		_, err := LoadWaivers(p)
		var me *model.Error
		if !errors.As(err, &me) || me.Rule != rules.WaiversLoad || !strings.Contains(me.Message, "not a regular file") {
			t.Errorf("%s: got %v, want a refusal of a file that is not regular", p, err)
		}
	}
}

// A waiver file that cannot be read or parsed is refused once, here, as
// SBX-POL-002 with the catalogue's fix; the provider, the run-time helper
// and policy check pass the error on as it is.
func TestLoadWaivers_RefusedAsOneRule(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("waivers:\n  - rule: TEAM-X-001\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	doc, ok := rules.Lookup(rules.WaiversLoad)
	if !ok {
		t.Fatal("SBX-POL-002 is not in the catalogue")
	}
	for _, p := range []string{filepath.Join(dir, "missing.yaml"), bad} {
		_, err := LoadWaivers(p)
		var me *model.Error
		if !errors.As(err, &me) {
			t.Fatalf("%s: got %T %v, want a *model.Error", p, err, err)
		}
		if me.Class != model.ErrConfiguration || me.Rule != rules.WaiversLoad || me.Attribute != "policy_waivers" || me.Fix != doc.Fix {
			t.Errorf("%s: got %#v, want ConfigurationError %s on policy_waivers with the catalogue's fix %q", p, me, rules.WaiversLoad, doc.Fix)
		}
		if !strings.Contains(me.Message, p) {
			t.Errorf("%s: the message %q does not name the file", p, me.Message)
		}
	}
}

package backends_test

import (
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
)

// Every descriptor's key is the one the registered backend derives (with
// the backends registered, as in dsn_test.go).
func TestCapabilitiesDescriptorKeys(t *testing.T) {
	keys := backends.Keys()
	if len(keys) == 0 {
		t.Fatal("no capability descriptors")
	}
	for _, key := range keys {
		c, ok := backends.Lookup(key)
		if !ok {
			t.Fatalf("backends.Lookup(%q) failed for a listed key", key)
		}
		if c.Key != key {
			t.Errorf("descriptor %q: key field %q", key, c.Key)
		}
		want := backends.CapabilityKey(c.Backend, c.Runtime)
		if c.Variant != "" {
			want += "+" + c.Variant
		}
		if want != key {
			t.Errorf("descriptor %q: backends.CapabilityKey(%q, %q) with variant %q is %q", key, c.Backend, c.Runtime, c.Variant, want)
		}
		if (c.Backend == "docker") != (c.Runtime != "") {
			t.Errorf("descriptor %q: runtime %q; Docker descriptors name a runtime, others none", key, c.Runtime)
		}
	}
	if got := backends.CapabilityKey("docker", ""); got != "docker/runc" {
		t.Errorf(`backends.CapabilityKey("docker", "") = %q, want docker/runc`, got)
	}
	if _, ok := backends.Lookup("docker/runc"); !ok {
		t.Error("no descriptor for the default Docker runtime runc")
	}
}

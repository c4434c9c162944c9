package kubernetes

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// An API server that does not answer is a clear error, not a client-go one.
func TestUnreachableAPIServer(t *testing.T) {
	dir := t.TempDir()
	cfg := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {}}]
contexts: [{name: dead, context: {cluster: c, user: u}}]
current-context: dead
`
	p := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", p)
	b, err := Open(mustDSN("kubernetes://dead/ns1"))
	if err != nil {
		t.Fatal(err)
	}
	spec := model.Spec{SpecVersion: model.SpecVersion, Backend: "kubernetes://dead/ns1", Image: "x",
		Network: model.NetworkPolicy{Egress: model.EgressAllow}, Resources: model.DefaultCaps(), TimeoutSeconds: 10, LifetimeSeconds: 60}
	_, err = b.Create(t.Context(), backends.CreateRequest{Spec: spec})
	if class(err) != model.ErrConfiguration || !strings.Contains(err.Error(), "not reachable") {
		t.Errorf("got %v", err)
	}
	// A context the kubeconfig lacks.
	if _, err := Open(mustDSN("kubernetes://nope/ns1")); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown context: %v", err)
	}
}

func TestExecBlock(t *testing.T) {
	b := execBlock("/w", []string{"A=1", "S=x y"})
	n := binary.BigEndian.Uint32(b[:4])
	if int(n) != len(b)-4 || string(b[4:]) != "/w\x00A=1\x00S=x y" {
		t.Errorf("block %q", b)
	}
}

func TestCheckMemory(t *testing.T) {
	mb := int64(128)
	lim := "134217728"
	cases := []struct {
		f  map[string]string
		ok bool
	}{
		{map[string]string{"mem_limit": lim, "memsw_limit": lim, "swap_total_kb": "100"}, true},
		{map[string]string{"mem_limit": lim, "memsw_limit": "9223372036854771712", "swap_total_kb": "100"}, false},
		{map[string]string{"mem_limit": lim, "memsw_limit": "-", "swap_total_kb": "0"}, true},
		{map[string]string{"mem_limit": lim, "memsw_limit": "-", "swap_total_kb": "1024"}, false},
		{map[string]string{"mem_limit": "1", "memsw_limit": "1"}, false},
		{map[string]string{"mem_limit": "-", "mem_max_v2": lim, "swap_max_v2": "0"}, true},
		{map[string]string{"mem_limit": "-", "mem_max_v2": lim, "swap_max_v2": "max", "swap_total_kb": "10"}, false},
		{map[string]string{"mem_limit": "-", "mem_max_v2": "-"}, false},
	}
	for i, c := range cases {
		_, err := checkMemory(c.f, mb)
		if (err == nil) != c.ok {
			t.Errorf("case %d %v: %v", i, c.f, err)
		}
		if err != nil && class(err) != model.ErrCapabilityNotSupported {
			t.Errorf("case %d: class %v", i, err)
		}
	}
}

func TestTmpfsSizesAddUp(t *testing.T) {
	for _, mb := range []int64{1, 64, 1024, 100000} {
		var sum int64
		for _, kib := range tmpfsSizes(mb) {
			sum += kib
			if kib <= 0 {
				t.Errorf("disk %d: a volume of %d KiB", mb, kib)
			}
		}
		if mb >= 64 && sum != mb*1024 {
			t.Errorf("disk %d MB: volumes add up to %d KiB", mb, sum)
		}
	}
}

// The probe's report comes from inside the pod: any bytes parse without a
// panic, and only a report with the marker and a protocol is one.
func FuzzParseProbe(f *testing.F) {
	f.Add([]byte("\x1esandboxio-probe\x1e protocol=sandboxio-wrap/1 kernel=6 cap_eff=0\n"))
	f.Add([]byte("junk\x1esandboxio-probe\x1e a=b c"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, ok := parseProbe(b)
		if ok && m["protocol"] == "" {
			t.Errorf("a report without a protocol: %q", b)
		}
	})
}

// The api option: pod (the default) or agent-sandbox, anything else refused
// by the DSN parser with a ConfigurationError naming the values.
func TestDSNAPIOption(t *testing.T) {
	for _, ok := range []string{"kubernetes://c/ns", "kubernetes://c/ns?api=pod", "kubernetes://c/ns?api=agent-sandbox&runtime_class=gvisor"} {
		d, err := backends.ParseDSN(ok)
		if err != nil {
			t.Errorf("%s: %v", ok, err)
			continue
		}
		if want := map[bool]string{true: APIAgentSandbox, false: APIPod}[strings.Contains(ok, "agent-sandbox")]; d.Options["api"] != want && d.Options["api"] != "" {
			t.Errorf("%s: api %q, want %q", ok, d.Options["api"], want)
		}
	}
	for _, bad := range []string{"kubernetes://c/ns?api=crd", "kubernetes://c/ns?api=", "kubernetes://c/ns?api=pod&api=pod", "kubernetes://c/ns?api=Agent-Sandbox"} {
		_, err := backends.ParseDSN(bad)
		if class(err) != model.ErrConfiguration || !strings.Contains(err.Error(), "api") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

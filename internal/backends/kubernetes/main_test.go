package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The tests run against the cluster in KUBECONFIG (make k8s-up, then
// scripts/k8s-wrap-image.sh; `make test-k8s` does both checks). Without it
// they skip, unless SANDBOXIO_REQUIRE_K8S=1, when they fail.
const testImage = "sandboxio.local/busybox:1"

var testNS string

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperMain())
	}
	code := m.Run()
	if testNS != "" {
		if b, err := openTest(); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			_ = b.cs.CoreV1().Namespaces().Delete(ctx, testNS, metav1.DeleteOptions{})
			cancel()
		}
	}
	os.Exit(code)
}

func openTest() (*k8sBackend, error) {
	d, err := backends.ParseDSN(testDSN(""))
	if err != nil {
		return nil, err
	}
	return Open(d)
}

func testDSN(query string) string {
	ns := testNS
	if ns == "" {
		ns = "default"
	}
	dsn := "kubernetes://sandboxio/" + ns
	if query != "" {
		dsn += "?" + query
	}
	return dsn
}

// needCluster returns a backend on a fresh test namespace, or skips (fails
// under SANDBOXIO_REQUIRE_K8S=1) when no cluster answers.
func needCluster(t testing.TB) *k8sBackend {
	t.Helper()
	fail := func(why string) {
		if os.Getenv("SANDBOXIO_REQUIRE_K8S") == "1" {
			t.Fatalf("SANDBOXIO_REQUIRE_K8S=1 and %s", why)
		}
		t.Skip(why)
	}
	if os.Getenv("KUBECONFIG") == "" {
		fail("KUBECONFIG is not set (make k8s-up)")
	}
	b, err := openTest()
	if err != nil {
		fail("no cluster: " + err.Error())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := b.cs.Discovery().ServerVersion(); err != nil {
		fail("the cluster does not answer: " + err.Error())
	}
	if testNS == "" {
		ns := testNSPrefix() + randomHex(4)
		if _, err := b.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("namespace: %v", err)
		}
		testNS = ns
		// The serviceaccount controller must have made "default" first.
		for i := 0; i < 100; i++ {
			if _, err := b.cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	b.namespace = testNS
	return b
}

// testNSPrefix starts the test namespaces' names (SANDBOXIO_K8S_NS_PREFIX,
// so that helpers sharing a cluster can tell theirs apart).
func testNSPrefix() string {
	if p := os.Getenv("SANDBOXIO_K8S_NS_PREFIX"); p != "" {
		return p
	}
	return "sbx-test-"
}

// needAgentSandbox is needCluster with ?api=agent-sandbox: one Sandbox per
// sandbox, on the same namespace.
func needAgentSandbox(t *testing.T) *k8sBackend {
	t.Helper()
	b := needCluster(t)
	ab, err := Open(mustDSN(testDSN("api=agent-sandbox")))
	if err != nil {
		t.Fatal(err)
	}
	ab.namespace = b.namespace
	return ab
}

// dsn is the DSN a test spec of this backend names.
func (b *k8sBackend) dsn() string {
	if b.api == APIAgentSandbox {
		return testDSN("api=agent-sandbox")
	}
	return testDSN("")
}

func testSpec(tenant string) model.Spec {
	return model.Spec{SpecVersion: model.SpecVersion, Name: "k8s-test", Backend: testDSN(""), Image: testImage,
		Network: model.NetworkPolicy{Egress: model.EgressAllow}, Resources: model.Caps{CPU: 0.5, MemoryMB: 128, DiskMB: 64, Pids: 256},
		TimeoutSeconds: 60, LifetimeSeconds: 300, TenantID: tenant, SessionID: "s1"}
}

// open creates a sandbox and closes it at the end of the test.
func open(t *testing.T, b *k8sBackend, req backends.CreateRequest) backends.Sandbox {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	s, err := b.Create(ctx, req)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(context.WithoutCancel(t.Context())); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

func run(t *testing.T, s backends.Sandbox, cmd ...string) backends.Result {
	t.Helper()
	res, err := s.Run(t.Context(), cmd, backends.RunOptions{})
	if err != nil {
		t.Fatalf("run %q: %v", cmd, err)
	}
	return res
}

func sh(t *testing.T, s backends.Sandbox, script string) string {
	t.Helper()
	res := run(t, s, "sh", "-c", script)
	if res.ExitCode != 0 {
		t.Fatalf("%s: exit %d: %s %s", script, res.ExitCode, res.Stdout, res.Stderr)
	}
	return strings.TrimSpace(string(res.Stdout))
}

func class(err error) model.ErrorClass {
	var me *model.Error
	if errors.As(err, &me) {
		return me.Class
	}
	return ""
}

func podsLeft(t *testing.T, b *k8sBackend, lbl map[string]string) int {
	t.Helper()
	pods, err := b.listPods(t.Context(), lbl)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

func tenant() string {
	return strings.ToLower(fmt.Sprintf("t-%s", randomHex(4)))
}

func errorsAs(err error, me **model.Error) bool { return errors.As(err, me) }

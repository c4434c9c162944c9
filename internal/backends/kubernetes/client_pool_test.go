package kubernetes_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	_ "github.com/sandboxio/terraform-provider-sandboxio/internal/backends/kubernetes"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
	"github.com/sandboxio/terraform-provider-sandboxio/sandbox"
)

// Through the run-time API, as a user runs it: the policy bundle accepts a
// warm pool on kubernetes:// (warm_pool in the capability data), the
// client's pool fills with warm pods, and an open of the template for a
// tenant is served from it (the audit record says source pool), bound to
// that tenant; closing it removes it and the pool refills. Close drains
// the pool.
func TestAccClientWarmPool(t *testing.T) {
	if os.Getenv("KUBECONFIG") == "" {
		if os.Getenv("SANDBOXIO_REQUIRE_K8S") == "1" {
			t.Fatal("SANDBOXIO_REQUIRE_K8S=1 and KUBECONFIG is not set")
		}
		t.Skip("KUBECONFIG is not set (make k8s-up)")
	}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(),
		&clientcmd.ConfigOverrides{CurrentContext: "sandboxio"}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(rc)
	ctx := t.Context()
	prefix := os.Getenv("SANDBOXIO_K8S_NS_PREFIX")
	if prefix == "" {
		prefix = "sbx-test-"
	}
	ns := prefix + "pool-" + time.Now().Format("150405")
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Namespaces().Delete(context.WithoutCancel(t.Context()), ns, metav1.DeleteOptions{})
	})
	for i := 0; i < 100; i++ {
		if _, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	tpl := model.Spec{SpecVersion: model.SpecVersion, Name: "k8s-pool", Backend: "kubernetes://sandboxio/" + ns, Image: "sandboxio.local/busybox:1",
		Network: model.NetworkPolicy{Egress: model.EgressAllow}, Resources: model.Caps{CPU: 0.25, MemoryMB: 128, DiskMB: 64, Pids: 256},
		TimeoutSeconds: 60, LifetimeSeconds: 300, WarmPool: &model.WarmPool{Size: 1, MaxIdleSeconds: 120}}
	spec, sum, err := tpl.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var recs []sandbox.Record
	c, err := sandbox.New(ctx, sandbox.Config{
		Audit: sandbox.NewAuditLog(nil, func(r sandbox.Record) { mu.Lock(); recs = append(recs, r); mu.Unlock() }),
		Pools: []sandbox.PoolConfig{{Spec: spec, SpecSHA256: sum}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
		if pl, _ := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: model.LabelManaged + "=true"}); pl != nil {
			for _, p := range pl.Items {
				if p.DeletionTimestamp == nil {
					t.Errorf("pod %s left after the client's close", p.Name)
				}
			}
		}
	}()
	deadline := time.Now().Add(120 * time.Second)
	for c.PoolStats()[0].Ready < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the pool did not fill: %+v", c.PoolStats()[0])
		}
		time.Sleep(100 * time.Millisecond)
	}
	sb, err := c.Open(ctx, sandbox.Request{Spec: spec, SpecSHA256: sum, TenantID: "acme", SessionID: "s-1"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sb.Run(ctx, []string{"echo", "hi"}, sandbox.RunOptions{})
	if err != nil || string(res.Stdout) != "hi\n" {
		t.Errorf("run: %v %q", err, res.Stdout)
	}
	pod, err := cs.CoreV1().Pods(ns).Get(ctx, sb.ID(), metav1.GetOptions{})
	if err != nil || pod.Labels[model.LabelTenantID] != "acme" || pod.Labels[model.LabelSessionID] != "s-1" {
		t.Errorf("the claimed pod's labels: %v %v", pod.Labels, err)
	}
	source := ""
	mu.Lock()
	for _, r := range recs {
		if r.Event == sandbox.EventCreated && r.SandboxID != nil && *r.SandboxID == sb.ID() {
			source = r.Source
		}
	}
	mu.Unlock()
	if source != sandbox.SourcePool {
		t.Errorf("the open's source is %q, want %q", source, sandbox.SourcePool)
	}
	if err := sb.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

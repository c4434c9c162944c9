package kubernetes

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// A warm sandbox is discarded as any sandbox is closed: the pod's deletion
// and then no container of it running are confirmed within the teardown
// grace. A pod that still runs when the grace ends (here the API server
// accepts the deletion and the kubelet never acts on it) is an
// *OrphanedError naming the pod and its labels, not a plain error and not
// success; a pod that is gone is success.
func TestWarmDiscardConfirmsTheKill(t *testing.T) {
	labels := map[string]string{model.LabelManaged: "true", labelPool: poolWarm}
	warmOn := func(cs *fake.Clientset) *warm {
		b := &k8sBackend{cs: cs, namespace: "ns1", grace: 300 * time.Millisecond}
		return &warm{b: b, s: &sandbox{b: b, name: "sandboxio-w-abc", labels: labels, expires: time.Now().Add(time.Minute)}}
	}

	t.Run("never stops", func(t *testing.T) {
		cs := fake.NewClientset(runningPod("sandboxio-w-abc"))
		cs.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, nil // accepted; the pod stays, running
		})
		err := warmOn(cs).Discard(t.Context())
		var oe *backends.OrphanedError
		if !errors.As(err, &oe) {
			t.Fatalf("want *OrphanedError, got %v", err)
		}
		if oe.Warning.Class != model.OrphanedSandboxWarning || oe.Warning.SandboxID != "sandboxio-w-abc" || oe.Warning.Labels[labelPool] != poolWarm {
			t.Fatalf("warning: %+v", oe.Warning)
		}
	})
	t.Run("deleted", func(t *testing.T) {
		cs := fake.NewClientset(runningPod("sandboxio-w-abc"))
		w := warmOn(cs)
		if err := w.Discard(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().Pods("ns1").Get(t.Context(), "sandboxio-w-abc", metav1.GetOptions{}); err == nil {
			t.Fatal("the discarded pod is still there")
		}
		if err := w.Discard(t.Context()); err != nil {
			t.Fatalf("a second discard: %v", err)
		}
	})
}

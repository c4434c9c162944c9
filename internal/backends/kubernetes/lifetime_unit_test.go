package kubernetes

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The kubelet counts activeDeadlineSeconds from the pod's start time in
// whole seconds, so it can kill the pod up to a second before expires, and
// the pod read back right after may still say Running. A command killed
// then, or an exec that broke then, is SandboxGone, not a result; a command
// that exited by itself in that second keeps its result. Seen on the test
// cluster: the conformance suite's lifetime behaviour got a plain exit.
func TestLastSecondOfTheLifetime(t *testing.T) {
	sb := func(left time.Duration) *sandbox {
		b := &k8sBackend{cs: fake.NewClientset(runningPod("sandboxio-abc")), namespace: "ns1"}
		return &sandbox{b: b, name: "sandboxio-abc", expires: time.Now().Add(left)}
	}
	gone := func(t *testing.T, err error) {
		t.Helper()
		var me *model.Error
		if !errors.As(err, &me) || me.Class != model.ErrSandboxGone || !strings.Contains(me.Message, "lifetime ended") {
			t.Fatalf("want SandboxGone for the lifetime, got %v", err)
		}
	}
	ctx := t.Context()

	t.Run("killed", func(t *testing.T) {
		s := sb(500 * time.Millisecond)
		_, err := s.completed(ctx, execResult{exitCode: exitSIGKILL, pid: 7}, time.Second)
		gone(t, err)
		gone(t, s.usable()) // and so is every later call
	})
	t.Run("exec broke", func(t *testing.T) {
		gone(t, sb(500*time.Millisecond).whyGone(ctx, errors.New("stream reset")))
	})
	t.Run("exec broke earlier", func(t *testing.T) {
		if err := sb(10*time.Second).whyGone(ctx, errors.New("stream reset")); err != nil {
			t.Fatalf("a running pod 10 s before its lifetime ends is not gone: %v", err)
		}
	})
	t.Run("exited by itself", func(t *testing.T) {
		res, err := sb(500*time.Millisecond).completed(ctx, execResult{exitCode: 0, stdout: []byte("done\n")}, time.Second)
		if err != nil || string(res.Stdout) != "done\n" {
			t.Fatalf("a command that finished in the last second lost its result: %+v %v", res, err)
		}
	})
}

// runningPod is a pod in namespace ns1 whose sandbox container runs, as the
// API server would show it.
func runningPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
			{Name: sandboxCtr, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
	}
}

package kubernetes

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

func agentSpec(b *k8sBackend, tn string) model.Spec {
	s := testSpec(tn)
	s.Backend = b.dsn()
	return s
}

func getSandboxObject(t *testing.T, b *k8sBackend, name string) (*unstructured.Unstructured, bool) {
	t.Helper()
	u, err := b.dyn.Resource(sandboxGVR).Namespace(b.namespace).Get(t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return u, true
}

// sandboxObjectsLeft counts the Sandboxes carrying the labels that are not
// being deleted.
func sandboxObjectsLeft(t *testing.T, b *k8sBackend, lbl map[string]string) int {
	t.Helper()
	sel, err := selectorFor(lbl)
	if err != nil {
		t.Fatal(err)
	}
	l, err := b.listSandboxObjects(t.Context(), sel)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, u := range l {
		if u.GetDeletionTimestamp() == nil {
			n++
		}
	}
	return n
}

// waitNothingLeft waits until neither a Sandbox nor a pod carries the labels.
func waitNothingLeft(t *testing.T, b *k8sBackend, lbl map[string]string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for sandboxObjectsLeft(t, b, lbl)+podsLeft(t, b, lbl) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %d Sandboxes and %d pods left", within, sandboxObjectsLeft(t, b, lbl), podsLeft(t, b, lbl))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// One Sandbox per sandbox: its pod is the controller's, built from the same
// pod spec as a plain pod (hardening, activeDeadlineSeconds), with the
// tenant and session labels on both objects; a command runs in it; Close
// deletes the Sandbox and its pod.
func TestAccAgentSandboxObjects(t *testing.T) {
	b := needAgentSandbox(t)
	tn := tenant()
	ctx := t.Context()
	s, err := b.Create(ctx, backends.CreateRequest{Spec: agentSpec(b, tn)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	u, ok := getSandboxObject(t, b, s.ID())
	if !ok {
		t.Fatalf("no Sandbox %s", s.ID())
	}
	pod, err := b.cs.CoreV1().Pods(b.namespace).Get(ctx, s.ID(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ownedBySandbox(pod) != s.ID() {
		t.Errorf("the pod is not controlled by the Sandbox: %+v", pod.OwnerReferences)
	}
	for _, m := range []map[string]string{u.GetLabels(), pod.Labels} {
		if m[model.LabelTenantID] != tn || m[model.LabelSessionID] != "s1" || m[model.LabelManaged] != "true" {
			t.Errorf("labels %v lack tenant %s and session s1", m, tn)
		}
	}
	// The pod is the plain path's pod spec, network lock included, as the
	// controller made it.
	plan := createPlan{spec: agentSpec(b, tn), caps: testSpec(tn).Resources, lifetime: 300 * time.Second}
	wantPod := podFor(plan, s.ID(), nil, nil)
	withLock(wantPod, plan)
	want := wantPod.Spec
	if last := pod.Spec.InitContainers[len(pod.Spec.InitContainers)-1]; last.Name != lockCtr || len(last.Command) == 0 {
		t.Errorf("the Sandbox's pod has no network lock: init containers %+v", pod.Spec.InitContainers)
	}
	c, wc := pod.Spec.Containers[0], want.Containers[0]
	if pod.Spec.ActiveDeadlineSeconds == nil || *pod.Spec.ActiveDeadlineSeconds != *want.ActiveDeadlineSeconds {
		t.Errorf("activeDeadlineSeconds %v, want %d", pod.Spec.ActiveDeadlineSeconds, *want.ActiveDeadlineSeconds)
	}
	if c.SecurityContext == nil || *c.SecurityContext.ReadOnlyRootFilesystem != true || *c.SecurityContext.AllowPrivilegeEscalation ||
		len(c.SecurityContext.Capabilities.Drop) != 1 || c.Resources.Limits.Memory().Cmp(*wc.Resources.Limits.Memory()) != 0 ||
		*pod.Spec.AutomountServiceAccountToken || len(pod.Spec.Volumes) != len(want.Volumes) || len(pod.Spec.InitContainers) != len(want.InitContainers) {
		t.Errorf("the pod differs from the plain pod spec: %+v", pod.Spec)
	}
	st, _, _ := unstructured.NestedString(u.Object, "spec", "shutdownTime")
	if exp, err := time.Parse(time.RFC3339, st); err != nil || exp.Sub(s.Info().Expires).Abs() > time.Second {
		t.Errorf("shutdownTime %q, expires %s", st, s.Info().Expires)
	}
	if got := sh(t, s, "echo hi; cat /proc/self/status | grep CapEff"); !strings.Contains(got, "hi") || !strings.Contains(got, "0000000000000000") {
		t.Errorf("run: %q", got)
	}
	if l, err := b.List(ctx, map[string]string{model.LabelTenantID: tn}); err != nil || len(l) != 1 || l[0].ID != s.ID() {
		t.Errorf("list by tenant: %+v %v", l, err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	waitNothingLeft(t, b, map[string]string{model.LabelTenantID: tn}, 15*time.Second)
}

// The lifetime holds with no client action: the kubelet ends the pod at
// activeDeadlineSeconds, and the controller deletes the Sandbox and its pod
// at shutdownTime. A Run afterwards is SandboxGone.
func TestAccAgentSandboxLifetime(t *testing.T) {
	b := needAgentSandbox(t)
	tn := tenant()
	spec := agentSpec(b, tn)
	spec.LifetimeSeconds = 8
	s := open(t, b, backends.CreateRequest{Spec: spec})
	sawDeadline := false
	deadline := time.Now().Add(60 * time.Second)
	for {
		pod, err := b.cs.CoreV1().Pods(b.namespace).Get(t.Context(), s.ID(), metav1.GetOptions{})
		if err == nil && pod.Status.Reason == "DeadlineExceeded" && !anyRunning(pod) {
			sawDeadline = true
		}
		if _, ok := getSandboxObject(t, b, s.ID()); !ok && apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("60 s after a lifetime of 8 s the Sandbox or its pod is still there")
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("the kubelet's deadline was seen before the controller removed the Sandbox: %v", sawDeadline)
	_, err := s.Run(t.Context(), []string{"true"}, backends.RunOptions{})
	var me *model.Error
	if !asModel(err, &me) || me.Class != model.ErrSandboxGone || !strings.Contains(me.Message, "lifetime") {
		t.Errorf("after the lifetime: %v", err)
	}
}

// activeDeadlineSeconds survives into the controller's pod and holds on its
// own: with the controller's shutdownTime a minute later, the kubelet ends
// the pod at the lifetime, and the controller makes no new one.
func TestAccAgentSandboxKubeletDeadline(t *testing.T) {
	b := needAgentSandbox(t)
	shutdownSlack = time.Minute
	defer func() { shutdownSlack = 0 }()
	spec := agentSpec(b, tenant())
	spec.LifetimeSeconds = 8
	s := open(t, b, backends.CreateRequest{Spec: spec})
	ctx := t.Context()
	first, err := b.cs.CoreV1().Pods(b.namespace).Get(ctx, s.ID(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		pod, err := b.cs.CoreV1().Pods(b.namespace).Get(ctx, s.ID(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pod.UID != first.UID {
			t.Fatal("the controller replaced the pod")
		}
		if pod.Status.Reason == "DeadlineExceeded" && !anyRunning(pod) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pod still runs after its lifetime: %s %s", pod.Status.Phase, pod.Status.Reason)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if _, ok := getSandboxObject(t, b, s.ID()); !ok {
		t.Error("the Sandbox is gone before its shutdownTime: this test shows nothing of the kubelet")
	}
	_, err = s.Run(ctx, []string{"true"}, backends.RunOptions{})
	if class(err) != model.ErrSandboxGone {
		t.Errorf("after the lifetime: %v", err)
	}
}

// A pod deleted from outside is replaced by the controller; the replacement
// is not this sandbox: a Run is SandboxGone, and the Sandbox is removed.
func TestAccAgentSandboxPodReplaced(t *testing.T) {
	b := needAgentSandbox(t)
	tn := tenant()
	s := open(t, b, backends.CreateRequest{Spec: agentSpec(b, tn)})
	ctx := t.Context()
	old, err := b.cs.CoreV1().Pods(b.namespace).Get(ctx, s.ID(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.deletePod(ctx, s.ID()); err != nil {
		t.Fatal(err)
	}
	// Wait for the controller's new pod to run.
	for i := 0; ; i++ {
		pod, err := b.cs.CoreV1().Pods(b.namespace).Get(ctx, s.ID(), metav1.GetOptions{})
		if err == nil && pod.UID != old.UID && pod.Status.Phase == corev1.PodRunning {
			break
		}
		if i > 300 {
			t.Fatal("the controller made no new pod")
		}
		time.Sleep(200 * time.Millisecond)
	}
	_, err = s.Run(ctx, []string{"true"}, backends.RunOptions{})
	var me *model.Error
	if !asModel(err, &me) || me.Class != model.ErrSandboxGone || !strings.Contains(me.Message, "deleted") {
		t.Fatalf("a Run in the replaced pod: %v", err)
	}
	waitNothingLeft(t, b, map[string]string{model.LabelTenantID: tn}, 30*time.Second)
}

// A cluster that does not serve the Sandbox resource at that version is a
// ConfigurationError saying so, and nothing is left.
func TestAccAgentSandboxNotServed(t *testing.T) {
	b := needAgentSandbox(t)
	saved := sandboxGVR
	sandboxGVR.Version = "v1alpha9"
	defer func() { sandboxGVR = saved }()
	_, err := b.Create(t.Context(), backends.CreateRequest{Spec: agentSpec(b, tenant())})
	if class(err) != model.ErrConfiguration || !strings.Contains(err.Error(), "does not serve") {
		t.Errorf("create: got %v", err)
	}
	_, err = b.Preflight(t.Context(), agentSpec(b, tenant()))
	if class(err) != model.ErrConfiguration || !strings.Contains(err.Error(), "does not serve") {
		t.Errorf("preflight: got %v", err)
	}
	sandboxGVR = saved
	if _, err := b.Preflight(t.Context(), agentSpec(b, tenant())); err != nil {
		t.Errorf("preflight where v1beta1 is served: %v", err)
	}
}

// Reap removes the Sandbox and its pod after its owner was SIGKILLed.
func TestAccAgentSandboxReap(t *testing.T) {
	b := needAgentSandbox(t)
	tn := tenant()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+testDSN("api=agent-sandbox"), helperEnv+"_TENANT="+tn)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if !strings.HasPrefix(line, "id ") {
		_ = cmd.Process.Kill()
		t.Fatalf("helper: %q", line)
	}
	id := strings.TrimSpace(line[3:])
	sel := map[string]string{model.LabelTenantID: tn}
	if _, ok := getSandboxObject(t, b, id); !ok {
		t.Fatalf("the helper's sandbox %s is no Sandbox", id)
	}
	if r, err := b.Reap(t.Context(), backends.ReapOptions{Labels: sel}); err != nil || len(r) != 0 {
		t.Fatalf("reap with the owner alive: %v %v", r, err)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	// A plain-pod backend reaps it too (`sandboxio reap` knows no api).
	plain := needCluster(t)
	r, err := plain.Reap(t.Context(), backends.ReapOptions{Labels: sel})
	if err != nil || len(r) != 1 || r[0].Reason != "owner gone" || r[0].Info.ID != id {
		t.Fatalf("reap after SIGKILL: %+v %v", r, err)
	}
	waitNothingLeft(t, b, sel, 30*time.Second)
}

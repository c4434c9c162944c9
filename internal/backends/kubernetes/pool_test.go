package kubernetes

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

const testSpecHash = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// warmTemplate is the template spec of a pool: the test spec with no
// tenant and no session, under a template name of its own.
func warmTemplate(b *k8sBackend, name string) model.Spec {
	s := testSpec("")
	s.Backend, s.Name, s.SessionID = b.dsn(), name, ""
	return s
}

func claimSpec(tpl model.Spec, tenant, session string) model.Spec {
	tpl.TenantID, tpl.SessionID = tenant, session
	return tpl
}

func createWarm(t *testing.T, b *k8sBackend, tpl model.Spec, idle time.Duration) backends.Warm {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	w, err := b.CreateWarm(ctx, backends.WarmRequest{Spec: tpl, SpecSHA256: testSpecHash, MaxIdle: idle})
	if err != nil {
		t.Fatalf("create warm: %v", err)
	}
	t.Cleanup(func() { _ = w.Discard(context.WithoutCancel(t.Context())) })
	return w
}

// A warm sandbox carries its template's labels and no tenant's, is listed
// for nobody, and holds no secret; the claim binds the tenant and session
// by label, the secret reaches the command from then on, and the sandbox
// cannot be claimed a second time (by this tenant or another).
func TestAccWarmPoolClaim(t *testing.T) {
	for _, api := range []string{APIPod, APIAgentSandbox} {
		t.Run(api, func(t *testing.T) {
			b := needCluster(t)
			if api == APIAgentSandbox {
				b = needAgentSandbox(t)
			}
			tpl := warmTemplate(b, "warm-"+randomHex(3))
			tpl.SecretNames = []string{"API_TOKEN"}
			w := createWarm(t, b, tpl, 60*time.Second)
			ctx := t.Context()
			pod, err := b.cs.CoreV1().Pods(b.namespace).Get(ctx, w.ID(), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if pod.Labels[labelPool] != poolWarm || pod.Labels[model.LabelTenantID] != "" || pod.Labels[model.LabelTemplate] != tpl.Name {
				t.Errorf("warm pod labels %v", pod.Labels)
			}
			if l, _ := b.List(ctx, map[string]string{model.LabelTemplate: tpl.Name}); len(l) != 0 {
				t.Errorf("an unclaimed warm sandbox is listed: %+v", l)
			}
			tn, canary := tenant(), "sbxcanary"+randomHex(8)
			claimed := time.Now()
			s, err := w.Claim(ctx, backends.ClaimRequest{Spec: claimSpec(tpl, tn, "s9"), SpecSHA256: testSpecHash,
				Secrets: map[string]string{"API_TOKEN": canary}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(ctx)
			pod, err = b.cs.CoreV1().Pods(b.namespace).Get(ctx, w.ID(), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if pod.Labels[model.LabelTenantID] != tn || pod.Labels[model.LabelSessionID] != "s9" || pod.Labels[labelPool] != poolClaimed {
				t.Errorf("claimed pod labels %v", pod.Labels)
			}
			// The kubelet counts it from the pod's start: the end is one
			// lifetime (300 s) after the claim.
			end := pod.Status.StartTime.Add(time.Duration(*pod.Spec.ActiveDeadlineSeconds) * time.Second)
			if d := end.Sub(claimed); d < 300*time.Second || d > 303*time.Second {
				t.Errorf("activeDeadlineSeconds %d ends the pod %s after the claim, want the lifetime 300 s", *pod.Spec.ActiveDeadlineSeconds, d)
			}
			if got := sh(t, s, `echo "$API_TOKEN"`); got != canary {
				t.Errorf("the secret inside the claimed sandbox: %q", got)
			}
			if l, err := b.List(ctx, map[string]string{model.LabelTenantID: tn, model.LabelSessionID: "s9"}); err != nil || len(l) != 1 || l[0].ID != w.ID() {
				t.Errorf("list by tenant and session: %+v %v", l, err)
			}
			if api == APIAgentSandbox {
				u, _ := getSandboxObject(t, b, w.ID())
				if u == nil || u.GetLabels()[model.LabelTenantID] != tn {
					t.Errorf("the Sandbox lacks the tenant label: %v", u)
				}
			}
			if _, err := w.Claim(ctx, backends.ClaimRequest{Spec: claimSpec(tpl, tenant(), "s1"), SpecSHA256: testSpecHash,
				Secrets: map[string]string{"API_TOKEN": "x"}}); err == nil {
				t.Error("a claimed warm sandbox was claimed again")
			}
			if err := s.Close(ctx); err != nil {
				t.Fatal(err)
			}
			waitNothingLeft(t, b, map[string]string{model.LabelTenantID: tn}, 20*time.Second)
		})
	}
}

// The lifetime counts from the claim and is held by the cluster with no
// client action: the kubelet ends the claimed pod one lifetime after the
// claim, not at its creation's lifetime nor at idle time plus lifetime.
func TestAccWarmPoolLifetimeFromClaim(t *testing.T) {
	b := needCluster(t)
	tpl := warmTemplate(b, "warm-"+randomHex(3))
	tpl.LifetimeSeconds = 8
	w := createWarm(t, b, tpl, 60*time.Second)
	time.Sleep(6 * time.Second)
	ctx := t.Context()
	claimed := time.Now()
	s, err := w.Claim(ctx, backends.ClaimRequest{Spec: claimSpec(tpl, tenant(), "s1"), SpecSHA256: testSpecHash})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	run(t, s, "true")
	for {
		pod, err := b.cs.CoreV1().Pods(b.namespace).Get(ctx, s.ID(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pod.Status.Reason == "DeadlineExceeded" && !anyRunning(pod) {
			break
		}
		if time.Since(claimed) > 40*time.Second {
			t.Fatalf("the claimed pod still runs %s after its claim, with a lifetime of 8 s", time.Since(claimed))
		}
		time.Sleep(250 * time.Millisecond)
	}
	if el := time.Since(claimed); el < 7*time.Second {
		t.Errorf("the pod ended %s after its claim, before its lifetime of 8 s", el)
	} else {
		t.Logf("the kubelet ended the claimed pod %s after the claim (lifetime 8 s)", el.Round(100*time.Millisecond))
	}
	if _, err := s.Run(ctx, []string{"true"}, backends.RunOptions{}); class(err) != model.ErrSandboxGone {
		t.Errorf("after the lifetime: %v", err)
	}
}

// With agent-sandbox the idle time is held by the controller: an unclaimed
// warm Sandbox is removed at its end with no client action.
func TestAccWarmPoolIdleAgentSandbox(t *testing.T) {
	b := needAgentSandbox(t)
	tpl := warmTemplate(b, "warm-"+randomHex(3))
	w := createWarm(t, b, tpl, 20*time.Second)
	sel := map[string]string{model.LabelTemplate: tpl.Name}
	deadline := w.IdleUntil().Add(30 * time.Second)
	for sandboxObjectsLeft(t, b, sel)+podsLeft(t, b, sel) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the unclaimed warm Sandbox outlived its idle time by 30 s")
		}
		time.Sleep(250 * time.Millisecond)
	}
	if time.Now().Before(w.IdleUntil()) {
		t.Errorf("the warm Sandbox went before its idle time")
	}
	if _, err := w.Claim(t.Context(), backends.ClaimRequest{Spec: claimSpec(tpl, tenant(), "s1"), SpecSHA256: testSpecHash}); err == nil {
		t.Error("a warm sandbox past its idle time was claimed")
	}
}

// A warm pod changed from outside is refused at its claim and removed; so
// is a claim for another template.
func TestAccWarmPoolTampered(t *testing.T) {
	b := needCluster(t)
	tpl := warmTemplate(b, "warm-"+randomHex(3))
	ctx := t.Context()
	w := createWarm(t, b, tpl, 60*time.Second)
	patch := []byte(`{"spec":{"activeDeadlineSeconds":200}}`)
	if _, err := b.cs.CoreV1().Pods(b.namespace).Patch(ctx, w.ID(), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	tn := tenant()
	_, err := w.Claim(ctx, backends.ClaimRequest{Spec: claimSpec(tpl, tn, "s1"), SpecSHA256: testSpecHash})
	if class(err) != model.ErrSandboxGone || !strings.Contains(err.Error(), "activeDeadlineSeconds") {
		t.Errorf("claim of a changed warm pod: %v", err)
	}
	waitNothingLeft(t, b, map[string]string{model.LabelTemplate: tpl.Name}, 20*time.Second)

	w2 := createWarm(t, b, tpl, 60*time.Second)
	_, err = w2.Claim(ctx, backends.ClaimRequest{Spec: claimSpec(tpl, tn, "s1"), SpecSHA256: strings.Repeat("f", 64)})
	if class(err) != model.ErrSandboxGone || !strings.Contains(err.Error(), "another template") {
		t.Errorf("claim for another template: %v", err)
	}
	waitNothingLeft(t, b, map[string]string{model.LabelTemplate: tpl.Name}, 20*time.Second)
}

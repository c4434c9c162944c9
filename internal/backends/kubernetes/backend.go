package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/vendorapi"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Name is the backend's name, the scheme of its DSN.
const Name = "kubernetes"

// InCluster is the DSN context that selects the pod's own service account.
const InCluster = "in-cluster"

// WrapImage is the image of the exec wrapper (package wrap), which the init
// container copies into the pod. It is built locally and imported into the
// nodes' runtime (scripts/k8s-wrap-image.sh), never pulled.
var WrapImage = "sandboxio.local/sandboxio-wrap:2"

type k8sBackend struct {
	cs        kubernetes.Interface
	rc        *rest.Config
	context   string
	namespace string
	runtime   string // the DSN's runtime_class
	netOpts   netOptions
	api       string // APIPod or APIAgentSandbox (the DSN's api)
	dyn       dynamic.Interface
	owner     backends.Owner
	grace     time.Duration

	mu    sync.Mutex
	nodes map[string]nodeFacts // what a probe showed of a node, by name

	// trace, when set (a benchmark), is told as each step of a create ends.
	trace func(step string)
}

func (b *k8sBackend) step(name string) {
	if b.trace != nil {
		b.trace(name)
	}
}

// quietClient silences client-go's own logging (klog): it writes stream
// errors this backend handles (an exec cut short) to the caller's stderr.
var quietClient = sync.OnceFunc(func() { klog.SetLogger(logr.Discard()) })

// Open returns the backend for a DSN's context and namespace. It makes no
// API call.
func Open(d backends.DSN) (*k8sBackend, error) {
	quietClient()
	if d.Scheme != Name {
		return nil, fmt.Errorf("kubernetes: DSN scheme %q", d.Scheme)
	}
	rc, err := restConfig(d.Context)
	if err != nil {
		return nil, err
	}
	return newBackend(rc, d)
}

// newBackend makes the clients on rc, with API server faults retried by
// this backend (retry.go) rather than by client-go.
func newBackend(rc *rest.Config, d backends.DSN) (*k8sBackend, error) {
	rc = rest.CopyConfig(rc)
	rc.UserAgent = "sandboxio"
	rc.Wrap(withRetries)
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	api := d.Options["api"]
	if api == "" {
		api = APIPod
	}
	b := &k8sBackend{cs: cs, dyn: dyn, rc: rc, context: d.Context, namespace: d.Namespace, runtime: d.Options["runtime_class"],
		api: api, owner: processOwner(), grace: model.TeardownGrace, nodes: map[string]nodeFacts{}}
	b.netOpts.podCIDRs, _ = parseCIDRList(d.Options["pod_cidr"])
	b.netOpts.serviceCIDRs, _ = parseCIDRList(d.Options["service_cidr"])
	return b, nil
}

// restConfig loads the context from the kubeconfig (KUBECONFIG, else
// ~/.kube/config), or the in-cluster configuration.
func restConfig(kctx string) (*rest.Config, error) {
	if kctx == InCluster {
		rc, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("kubernetes in-cluster config: %w", err)
		}
		return rc, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if os.Getenv("KUBECONFIG") == "" {
		if _, err := os.Stat(rules.GetDefaultFilename()); err != nil {
			return nil, fmt.Errorf("kubernetes: no kubeconfig (set KUBECONFIG): %w", backends.ErrNoCredentials)
		}
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kctx})
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes kubeconfig context %q: %w", kctx, err)
	}
	return rc, nil
}

func (b *k8sBackend) Name() string { return Name }

func (b *k8sBackend) Capabilities(string) (backends.Capabilities, bool) {
	return backends.Lookup(Name)
}

// Close releases nothing: sandboxes still open are bounded by their
// lifetime (activeDeadlineSeconds), which the kubelet enforces.
func (b *k8sBackend) Close() error { return nil }

// apiError turns what the API server answered into an error that says
// what to do: refused credentials and missing permissions are
// ConfigurationErrors about the credentials, an unreachable server one
// about the cluster; anything else is wrapped with what was being done.
func apiError(what string, err error) error {
	var ne net.Error
	switch {
	case apierrors.IsUnauthorized(err):
		return &model.Error{Class: model.ErrConfiguration, Attribute: "credentials",
			Message: fmt.Sprintf("the Kubernetes API server refused the kubeconfig's credentials (%s: 401 Unauthorized)", what),
			Fix:     "renew the token or client certificate of the kubeconfig context (KUBECONFIG); in a pod, its service account token", Err: err}
	case apierrors.IsForbidden(err):
		return &model.Error{Class: model.ErrConfiguration, Attribute: "credentials",
			Message: fmt.Sprintf("the Kubernetes API server does not allow the kubeconfig's credentials to do this (%s: 403 Forbidden): %s", what, statusMessage(err)),
			Fix:     "grant the context's user get, list, watch, create, patch and delete on pods and create on pods/exec in the namespace (and on agents.x-k8s.io sandboxes with ?api=agent-sandbox)", Err: err}
	case errors.As(err, &ne) || strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "no such host"):
		return &model.Error{Class: model.ErrConfiguration, Attribute: "backend",
			Message: fmt.Sprintf("the Kubernetes API server is not reachable (%s): %v", what, err),
			Fix:     "check that the cluster is up and that KUBECONFIG's context points at it", Err: err}
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) && vendorapi.Retryable(int(st.Status().Code)) {
		return fmt.Errorf("%s: the Kubernetes API server is overloaded or failing (%d, retried): %w", what, st.Status().Code, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// statusMessage is the API server's own message in err.
func statusMessage(err error) string {
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Message != "" {
		return st.Status().Message
	}
	return err.Error()
}

// createRefused is apiError for a create the API server answered: a
// refusal by admission (Pod Security, a policy engine) or as invalid names
// the namespace's policy, and a conflict the name.
func createRefused(kind, name string, err error) error {
	msg := statusMessage(err)
	switch {
	case apierrors.IsInvalid(err) || (apierrors.IsForbidden(err) && admissionRefusal(msg)):
		return &model.Error{Class: model.ErrConfiguration, Attribute: "backend",
			Message: fmt.Sprintf("the cluster refused the %s: %s", kind, msg),
			Fix:     "check the namespace's admission policy (Pod Security level, policy engines) and the RuntimeClass", Err: err}
	case apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err):
		return &model.Error{Class: model.ErrConfiguration, Attribute: "backend",
			Message: fmt.Sprintf("the Kubernetes API server answered 409 Conflict to the create of %s %s: %s", kind, name, msg),
			Fix:     "an object of that name exists (names are random, so something else writes them): list the namespace's sandboxes by label and remove what is not yours, then open again", Err: err}
	}
	return apiError(kind+" create", err)
}

// admissionRefusal: a 403 from an admission plugin rather than from RBAC.
func admissionRefusal(msg string) bool {
	return strings.Contains(msg, "PodSecurity") || strings.Contains(msg, "admission") || strings.Contains(msg, "denied the request")
}

// List returns the sandboxes carrying every one of the labels; pods that
// have ended are not listed (Reap finds them).
func (b *k8sBackend) List(ctx context.Context, want map[string]string) ([]backends.Info, error) {
	pods, err := b.listPods(ctx, want)
	if err != nil {
		return nil, err
	}
	out := make([]backends.Info, 0, len(pods))
	for i := range pods {
		// A pod that has ended (its lifetime, activeDeadlineSeconds, or a
		// failure) runs no process and is no sandbox any more; its object
		// stays in the API until `sandboxio reap` deletes it.
		if ph := pods[i].Status.Phase; ph == corev1.PodFailed || ph == corev1.PodSucceeded || pods[i].Labels[labelProbe] != "" {
			continue
		}
		// An unclaimed warm sandbox is nobody's yet.
		if pods[i].Labels[labelPool] == poolWarm {
			continue
		}
		out = append(out, infoFromPod(&pods[i]))
	}
	return out, nil
}

// selectorFor is the label selector of this backend's sandboxes carrying
// every one of the labels.
func selectorFor(want map[string]string) (string, error) {
	sel := labels.Set{model.LabelManaged: "true"}
	for k, v := range want {
		sel[k] = v
	}
	sl, err := labels.ValidatedSelectorFromSet(sel)
	if err != nil {
		return "", &model.Error{Class: model.ErrConfiguration, Attribute: "labels",
			Message: "the labels cannot be a Kubernetes label selector: " + err.Error(), Fix: "use label keys and values Kubernetes accepts"}
	}
	return sl.String(), nil
}

func (b *k8sBackend) listPods(ctx context.Context, want map[string]string) ([]corev1.Pod, error) {
	sel, err := selectorFor(want)
	if err != nil {
		return nil, err
	}
	pl, err := b.cs.CoreV1().Pods(b.namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, apiError("pod list", err)
	}
	return pl.Items, nil
}

func infoFromPod(p *corev1.Pod) backends.Info {
	in := backends.Info{
		ID:              p.Name,
		Backend:         Name,
		Tier:            model.Tier(p.Annotations[annTier]),
		Labels:          p.Labels,
		Created:         p.CreationTimestamp.Time,
		DiskCapStrategy: p.Annotations[annDiskCap],
		PidsCapStrategy: p.Annotations[annPidsCap],
		Running:         p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil,
	}
	if t, err := time.Parse(time.RFC3339, p.Annotations[annExpires]); err == nil {
		in.Expires = t
	}
	return in
}

// Preflight checks a spec without creating anything: it is valid for this
// backend and the namespace exists. What only a pod can show (limits, tier)
// is shown at create.
func (b *k8sBackend) Preflight(ctx context.Context, spec model.Spec) (backends.Preflight, error) {
	p, err := b.validate(backends.CreateRequest{Spec: spec}, false)
	if err != nil {
		return backends.Preflight{}, err
	}
	if _, err := b.cs.CoreV1().Namespaces().Get(ctx, b.namespace, metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return backends.Preflight{}, &model.Error{Class: model.ErrConfiguration, Attribute: "backend",
				Message: fmt.Sprintf("namespace %s does not exist", b.namespace), Fix: "create the namespace, or name one that exists in the DSN"}
		}
		return backends.Preflight{}, apiError("namespace get", err)
	}
	if b.api == APIAgentSandbox {
		if err := b.sandboxesServed(); err != nil {
			return backends.Preflight{}, err
		}
	}
	// The lock this template's sandboxes get is shown on the namespace (a
	// probe, cached per cluster, namespace and mode).
	if err := b.proven(ctx, p.egress.mode); err != nil {
		return backends.Preflight{}, err
	}
	return backends.Preflight{Tier: p.tier, Image: spec.Image, DiskCapStrategy: diskDescription(p.caps.DiskMB),
		PidsCapStrategy: "the node's podPidsLimit, measured from inside the pod at create"}, nil
}

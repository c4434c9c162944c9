package kubernetes

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	backendtest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/conformance"
)

// faultProxy stands between the backend and the test cluster's API server,
// as a load balancer would: every request (watches and exec streams too)
// goes on to the real API server under the admin's credentials, once the
// client's bearer token (a canary, so the suite can show it never leaks)
// has been checked. An armed fault is answered instead, the way the API
// server answers: a Status object with the code's reason, and Retry-After
// (header and details.retryAfterSeconds) when asked. It is the conformance
// suite's fault injection (backendtest.Faults) on Kubernetes: the backend
// cannot tell it from an API server having a bad moment.
type faultProxy struct {
	srv      *httptest.Server
	token    string
	upstream *url.URL
	rt       http.RoundTripper
	rp       *httputil.ReverseProxy

	mu     sync.Mutex
	fault  backendtest.Fault
	left   int
	counts map[backendtest.Op]int
}

// newFaultProxy starts the proxy in front of admin's API server and
// returns it with a client configuration that reaches the cluster through
// it, authenticated by the canary token alone.
func newFaultProxy(t *testing.T, admin *rest.Config, token string) (*faultProxy, *rest.Config) {
	t.Helper()
	up, err := url.Parse(admin.Host)
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg, err := rest.TLSConfigFor(admin)
	if err != nil {
		t.Fatal(err)
	}
	if tlsCfg == nil {
		tlsCfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	// HTTP/1.1 only: an exec stream's upgrade cannot ride an HTTP/2
	// connection.
	tlsCfg.NextProtos = []string{"http/1.1"}
	tr := &http.Transport{TLSClientConfig: tlsCfg, Proxy: nil, MaxIdleConnsPerHost: 32, IdleConnTimeout: 30 * time.Second}
	p := &faultProxy{token: token, upstream: up, rt: tr, counts: map[backendtest.Op]int{}}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(up)
			pr.Out.Header.Del("Authorization")
			if admin.BearerToken != "" {
				pr.Out.Header.Set("Authorization", "Bearer "+admin.BearerToken)
			}
		},
		Transport:     tr,
		FlushInterval: -1,
		ErrorLog:      nil,
	}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(p.serve))
	p.srv.StartTLS()
	t.Cleanup(func() {
		p.srv.CloseClientConnections()
		p.srv.Close()
		tr.CloseIdleConnections()
	})
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.srv.Certificate().Raw})
	return p, &rest.Config{Host: p.srv.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
}

func (p *faultProxy) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+p.token {
		writeStatus(w, http.StatusUnauthorized, 0, "Unauthorized")
		return
	}
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(io.LimitReader(r.Body, 8<<20))
		_ = r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
	}
	op := opOf(r, body)
	f, armed := p.take(op)
	if !armed {
		p.rp.ServeHTTP(w, r)
		return
	}
	if f.Applied {
		// The API server does the work; its answer is lost.
		out, err := http.NewRequestWithContext(r.Context(), r.Method, p.upstream.String()+r.URL.RequestURI(), bytes.NewReader(body))
		if err == nil {
			out.Header = r.Header.Clone()
			out.Header.Del("Authorization")
			if resp, err := p.rt.RoundTrip(out); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		}
	}
	if f.Delay > 0 {
		select {
		case <-time.After(f.Delay):
		case <-r.Context().Done():
			return
		}
	}
	writeStatus(w, f.Status, f.RetryAfter, fmt.Sprintf("injected fault on %s", op))
}

// take counts a request of op and says whether an armed fault answers it.
func (p *faultProxy) take(op backendtest.Op) (backendtest.Fault, bool) {
	if op == "" {
		return backendtest.Fault{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts[op]++
	if p.left <= 0 || p.fault.Op != op {
		return backendtest.Fault{}, false
	}
	p.left--
	return p.fault, true
}

// Inject implements backendtest.Faults.
func (p *faultProxy) Inject(f backendtest.Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault, p.left = f, max(f.Times, 1)
	p.counts = map[backendtest.Op]int{}
}

// Requests implements backendtest.Faults.
func (p *faultProxy) Requests(op backendtest.Op) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[op]
}

// Clear implements backendtest.Faults.
func (p *faultProxy) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault, p.left = backendtest.Fault{}, 0
}

// opOf names the suite's operation a request is: a sandbox's create (a
// pod or Sandbox, not an egress probe's pod), list, read, delete, or an
// exec (run, or upload when it runs the wrapper's put). Watches and
// everything else are not the suite's operations.
func opOf(r *http.Request, body []byte) backendtest.Op {
	q := r.URL.Query()
	if w := q.Get("watch"); w == "true" || w == "1" {
		return ""
	}
	var rest []string
	switch parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/"); {
	case len(parts) >= 5 && parts[0] == "api" && parts[1] == "v1" && parts[2] == "namespaces" && parts[4] == "pods":
		rest = parts[5:]
	case len(parts) >= 6 && parts[0] == "apis" && parts[1] == sandboxGVR.Group && parts[3] == "namespaces" && parts[5] == sandboxGVR.Resource:
		rest = parts[6:]
	default:
		return ""
	}
	switch {
	case len(rest) == 0 && r.Method == http.MethodPost:
		var obj metav1.PartialObjectMetadata
		if json.Unmarshal(body, &obj) == nil && obj.Labels[labelProbe] != "" {
			return ""
		}
		return backendtest.OpCreate
	case len(rest) == 0 && r.Method == http.MethodGet:
		return backendtest.OpList
	case len(rest) == 1 && r.Method == http.MethodGet:
		return backendtest.OpGet
	case len(rest) == 1 && r.Method == http.MethodDelete:
		return backendtest.OpKill
	case len(rest) == 2 && rest[1] == "exec":
		for _, c := range q["command"] {
			if c == "put" {
				return backendtest.OpUpload
			}
		}
		return backendtest.OpRun
	}
	return ""
}

// writeStatus answers as the API server does: a v1 Status with the code's
// reason, and Retry-After in whole seconds, rounded up.
func writeStatus(w http.ResponseWriter, code int, retryAfter time.Duration, msg string) {
	reasons := map[int]metav1.StatusReason{
		401: metav1.StatusReasonUnauthorized, 403: metav1.StatusReasonForbidden, 404: metav1.StatusReasonNotFound,
		409: metav1.StatusReasonAlreadyExists, 429: metav1.StatusReasonTooManyRequests, 500: metav1.StatusReasonInternalError,
		502: metav1.StatusReasonServiceUnavailable, 503: metav1.StatusReasonServiceUnavailable, 504: metav1.StatusReasonTimeout,
	}
	st := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Code: int32(code), Reason: reasons[code], Message: msg}
	if retryAfter > 0 {
		s := int32(math.Ceil(retryAfter.Seconds()))
		w.Header().Set("Retry-After", fmt.Sprint(s))
		st.Details = &metav1.StatusDetails{RetryAfterSeconds: s}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(st)
}

// proxied returns b's twin that reaches the cluster through a fault proxy,
// authenticated by a canary token.
func proxied(t *testing.T, b *k8sBackend) (*k8sBackend, *faultProxy, string) {
	t.Helper()
	token := "sbx-canary-k8s-" + randomHex(12)
	p, rc := newFaultProxy(t, b.rc, token)
	d, err := backends.ParseDSN(b.dsn())
	if err != nil {
		t.Fatal(err)
	}
	pb, err := newBackend(rc, d)
	if err != nil {
		t.Fatal(err)
	}
	pb.namespace = b.namespace
	return pb, p, token
}

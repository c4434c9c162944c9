// Package e2bserver is a local conformance server for the E2B backend: the
// subset of E2B's REST API and envd that internal/backends/e2b uses, validated
// as E2B validates it, with every command run in a local sandbox of the
// hardened Docker backend, never on the host. It is test support; E2B's
// official JavaScript SDK referees it (referee/package-lock.json pins it).
//
// See docs/design/conformance-servers.md for the pinned specs it follows.
package e2bserver

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/fakes/fakeserver"
)

// EnvdVersion is the envd version the server reports. The SDK picks its
// wire behaviour by it: from 0.4.0 no default user header, from 0.5.7
// octet-stream uploads are accepted (both upload forms are served).
const EnvdVersion = "0.5.7"

// EnvdPort is envd's port inside an E2B sandbox; the SDK names it in the
// E2b-Sandbox-Port header and in sandbox host names.
const EnvdPort = 49983

// Template is what one E2B template ID stands for locally.
type Template struct {
	Image      string // Docker image the sandbox runs
	Runtime    string // Docker runtime; "" is runc
	CPUCount   int
	MemoryMB   int
	DiskSizeMB int
}

// Config configures a Server.
type Config struct {
	APIKey    string              // the one key accepted in X-API-Key; required
	Templates map[string]Template // template ID -> local template; required
	Docker    backends.Backend    // the hardened Docker backend; required
	// MaxTimeout is the longest sandbox timeout accepted (E2B's plan
	// limit, one hour on the base tier); 0 means one hour.
	MaxTimeout time.Duration
}

// Server is a running conformance server.
type Server struct {
	// URL is the base URL of both the control plane (E2B_API_URL) and envd
	// (E2B_SANDBOX_URL): their paths do not overlap, and envd requests name
	// their sandbox in the E2b-Sandbox-Id header as the SDK sends it.
	fakeserver.HTTP

	cfg Config

	mu        sync.Mutex
	sandboxes map[string]*sbx
	records   map[string]*Record
	fakeserver.Faults
	closed bool
	wg     sync.WaitGroup
}

// Start listens on 127.0.0.1 on a free port and serves.
func Start(cfg Config) (*Server, error) {
	return StartOn("127.0.0.1:0", cfg)
}

// StartOn listens on addr and serves.
func StartOn(addr string, cfg Config) (*Server, error) {
	if cfg.APIKey == "" || cfg.Docker == nil || len(cfg.Templates) == 0 {
		return nil, errors.New("e2bserver: APIKey, Docker and Templates are required")
	}
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = time.Hour
	}
	s := &Server{cfg: cfg, sandboxes: map[string]*sbx{}, records: map[string]*Record{}}
	s.Answer = apiError
	if err := s.Listen("e2bserver", addr, s.Handler()); err != nil {
		return nil, err
	}
	return s, nil
}

// Handler routes control-plane and envd requests.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /sandboxes", s.auth(OpCreate, func(w http.ResponseWriter, r *http.Request) { s.create(w, r, false) }))
	mux.HandleFunc("POST /v2/sandboxes", s.auth(OpCreate, func(w http.ResponseWriter, r *http.Request) { s.create(w, r, true) }))
	mux.HandleFunc("GET /v2/sandboxes", s.auth(OpList, s.list))
	mux.HandleFunc("GET /sandboxes/{sandboxID}", s.auth(OpGet, s.get))
	mux.HandleFunc("DELETE /sandboxes/{sandboxID}", s.auth(OpKill, s.kill))
	mux.HandleFunc("POST /sandboxes/{sandboxID}/timeout", s.auth(OpSetTimeout, s.setTimeout))
	s.envdRoutes(mux)
	return mux
}

// Close kills every sandbox still open and stops serving.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	open := slices.Collect(maps.Values(s.sandboxes))
	s.sandboxes = map[string]*sbx{}
	s.mu.Unlock()
	first := fakeserver.EndAll(open, func(sb *sbx) error { return sb.end("server closed") })
	s.Shutdown()
	s.wg.Wait()
	return first
}

// Record is what the server saw and did for one sandbox; it stays after the
// sandbox ends, so a test can observe what the adapter asked for.
type Record struct {
	SandboxID           string
	TemplateID          string
	Path                string // the create call: /sandboxes or /v2/sandboxes
	Metadata            map[string]string
	EnvVars             map[string]string
	Timeout             time.Duration // as last set (create or setTimeout)
	AllowInternetAccess *bool
	AllowOut, DenyOut   []string
	// LocalNetwork is what the Docker sandbox got: "none" or "bridge".
	LocalNetwork string
	// Unenforced lists what was asked and cannot be enforced exactly here:
	// an allow list (Docker has no per-destination egress filter), so the
	// local sandbox gets no network at all, which is stricter than asked.
	Unenforced []string
	DockerID   string
	// AccessToken is the envdAccessToken the server issued, for canary
	// tests that look for it where it must not be.
	AccessToken string
	Ended       string // why the sandbox ended; "" while it runs
	// ProcessEnvs are the envs of each process started (values as sent),
	// so that a test can see where secrets went.
	ProcessEnvs []map[string]string
}

// Observe returns a copy of the record of a sandbox.
func (s *Server) Observe(sandboxID string) (Record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[sandboxID]
	if !ok {
		return Record{}, false
	}
	c := *r
	c.ProcessEnvs = append([]map[string]string(nil), r.ProcessEnvs...)
	return c, true
}

// AccessToken returns a running sandbox's envdAccessToken, for canary tests.
func (s *Server) AccessToken(sandboxID string) string {
	if sb, ok := s.lookup(sandboxID); ok {
		return sb.token
	}
	return ""
}

// Running lists the IDs of the sandboxes that are running.
func (s *Server) Running() []string {
	return fakeserver.SortedKeys(&s.mu, s.sandboxes)
}

// lookup returns a running sandbox.
func (s *Server) lookup(id string) (*sbx, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.sandboxes[id]
	if ok && !time.Now().Before(sb.endAt()) {
		return nil, false // past its timeout: gone, whether or not the timer has fired
	}
	return sb, ok
}

// remove takes a sandbox out of the running set; it reports whether it was there.
func (s *Server) remove(id, why string) (*sbx, bool) {
	return fakeserver.Remove(&s.mu, s.sandboxes, s.records, id, func(r *Record) { r.Ended = why })
}

func (s *Server) updateRecord(id string, f func(*Record)) {
	fakeserver.Update(&s.mu, s.records, id, f)
}

const idChars = "abcdefghijklmnopqrstuvwxyz0123456789"

// newID is a sandbox ID in E2B's form: 20 lower-case letters and digits.
func newID() string {
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = idChars[int(b[i])%len(idChars)]
	}
	return string(b)
}

func newToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// apiKeyOK compares in constant time.
func (s *Server) apiKeyOK(got string) bool {
	return got != "" && constantEq(got, s.cfg.APIKey)
}

func constantEq(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	var v byte
	for i := 0; i < len(a); i++ {
		v |= a[i] ^ b[i]
	}
	return v == 0
}

func trimmed(s string) string { return strings.TrimSpace(s) }

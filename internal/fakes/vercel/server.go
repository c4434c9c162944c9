// Package vercelserver is a local conformance server for the Vercel Sandbox
// backend: the subset of Vercel's REST API that internal/backends/vercel uses,
// with every command run in a local sandbox of the hardened Docker backend,
// never on the host. It is test support; Vercel's official SDK referees it
// (referee/package-lock.json pins it). An allow list Docker cannot enforce
// gets no network at all, recorded as Unenforced.
//
// See docs/design/conformance-servers.md for what differs from Vercel.
package vercelserver

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/fakes/fakeserver"
)

// Config configures a Server.
type Config struct {
	// Tokens are the bearer tokens accepted (an access token, an OIDC
	// token); required.
	Tokens []string
	// TeamID and ProjectID are the one team and project served; required.
	TeamID, ProjectID string
	// Runtimes maps a runtime name (node22, python3.13) to the local Docker
	// image standing for it; required.
	Runtimes map[string]string
	// Docker is the hardened Docker backend; required.
	Docker backends.Backend
	// MaxTimeout is the longest sandbox timeout accepted (Vercel's plan
	// limit: 5 hours on Pro); 0 means 5 hours.
	MaxTimeout time.Duration
}

// Vercel's limits the server enforces.
const (
	DefaultTimeout = 5 * time.Minute // a create without timeout
	MaxVCPUs       = 8
	MemoryPerVCPU  = 2048 // MB
	MaxTags        = 5
	WorkDir        = "/work" // the session's cwd here (Vercel: /vercel/sandbox)
)

// Server is a running conformance server.
type Server struct {
	// URL is the API base URL, the SDK's baseUrl (Vercel: https://vercel.com/api).
	fakeserver.HTTP

	cfg Config

	mu        sync.Mutex
	sandboxes map[string]*sbx // by name
	sessions  map[string]*sbx // by session ID
	records   map[string]*Record
	fakeserver.Faults
	closed bool
}

// Start listens on 127.0.0.1 on a free port and serves.
func Start(cfg Config) (*Server, error) { return StartOn("127.0.0.1:0", cfg) }

// StartOn listens on addr and serves.
func StartOn(addr string, cfg Config) (*Server, error) {
	if len(cfg.Tokens) == 0 || cfg.TeamID == "" || cfg.ProjectID == "" || cfg.Docker == nil || len(cfg.Runtimes) == 0 {
		return nil, errors.New("vercelserver: Tokens, TeamID, ProjectID, Runtimes and Docker are required")
	}
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = 5 * time.Hour
	}
	s := &Server{cfg: cfg, sandboxes: map[string]*sbx{}, sessions: map[string]*sbx{}, records: map[string]*Record{}}
	s.Answer = func(w http.ResponseWriter, status int, msg string) { apiError(w, status, "injected_fault", msg) }
	if err := s.Listen("vercelserver", addr, s.Handler()); err != nil {
		return nil, err
	}
	return s, nil
}

// Handler routes the API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v2/sandboxes", s.auth(OpCreate, func(w http.ResponseWriter, r *http.Request) { s.create(w, r, "/v2/sandboxes") }))
	mux.HandleFunc("POST /v3/sandboxes", s.auth(OpCreate, func(w http.ResponseWriter, r *http.Request) { s.create(w, r, "/v3/sandboxes") }))
	mux.HandleFunc("GET /v2/sandboxes", s.auth(OpList, s.list))
	mux.HandleFunc("GET /v2/sandboxes/{name}", s.auth(OpGet, s.get))
	mux.HandleFunc("DELETE /v2/sandboxes/{name}", s.auth(OpKill, s.delete))
	mux.HandleFunc("GET /v2/sandboxes/sessions/{sid}", s.auth(OpGet, s.session(s.getSession)))
	mux.HandleFunc("POST /v2/sandboxes/sessions/{sid}/stop", s.auth(OpStop, s.session(s.stop)))
	mux.HandleFunc("POST /v2/sandboxes/sessions/{sid}/cmd", s.auth(OpRun, s.session(s.runCmd)))
	mux.HandleFunc("GET /v2/sandboxes/sessions/{sid}/cmd/{cid}", s.auth(OpGet, s.session(s.getCmd)))
	mux.HandleFunc("POST /v2/sandboxes/sessions/{sid}/cmd/{cid}/kill", s.auth(OpKillCmd, s.session(s.killCmd)))
	mux.HandleFunc("POST /v2/sandboxes/sessions/{sid}/fs/write", s.auth(OpUpload, s.session(s.write)))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusNotFound, "not_found", fmt.Sprintf("%s %s is not served by this conformance server", r.Method, r.URL.Path))
	})
	return mux
}

// Close stops every session still running and stops serving.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	open := slices.Collect(maps.Values(s.sandboxes))
	s.mu.Unlock()
	first := fakeserver.EndAll(open, func(sb *sbx) error { return sb.end("server closed") })
	s.Shutdown()
	return first
}

// Record is what the server saw and did for one sandbox; it stays after the
// sandbox ends, so that a test can observe what the adapter asked for.
type Record struct {
	Name, SessionID string
	Path            string // the create call: /v2/sandboxes or /v3/sandboxes
	ProjectID       string
	Runtime         string
	Persistent      bool
	VCPUs           int
	MemoryMB        int
	Timeout         time.Duration
	Tags            map[string]string
	Env             map[string]string
	// NetworkPolicy is the policy as received (mode, or allow/subnets).
	NetworkMode  string   // allow-all, deny-all or custom
	AllowDomains []string // custom: allow
	AllowCIDRs   []string // custom: subnets.allow
	DenyCIDRs    []string // custom: subnets.deny
	// LocalNetwork is what the Docker sandbox got: "none" or "bridge".
	LocalNetwork string
	// Unenforced lists what was asked and cannot be enforced exactly here.
	Unenforced []string
	DockerID   string
	Ended      string // why the session ended; "" while it runs
	Deleted    bool
	// CommandEnvs are the envs of each command (values as sent).
	CommandEnvs []map[string]string
}

// Observe returns a copy of the record of a sandbox, by name or session ID.
func (s *Server) Observe(nameOrSession string) (Record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[nameOrSession]
	if !ok {
		if sb, found := s.sessions[nameOrSession]; found {
			r, ok = s.records[sb.name], true
		}
	}
	if !ok || r == nil {
		return Record{}, false
	}
	c := *r
	c.CommandEnvs = append([]map[string]string(nil), r.CommandEnvs...)
	return c, true
}

// Running lists the names of the sandboxes whose session runs.
func (s *Server) Running() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for name, sb := range s.sandboxes {
		if sb.running() {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func (s *Server) updateRecord(name string, f func(*Record)) {
	fakeserver.Update(&s.mu, s.records, name, f)
}

func randomID(prefix string, n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
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

// Package daytonaserver is a local conformance server for the Daytona backend:
// the subset of Daytona's REST and toolbox APIs that internal/backends/daytona
// uses, with every command run in a local sandbox of the hardened Docker
// backend, never on the host. It is test support; Daytona's official
// TypeScript SDK referees it (referee/package-lock.json pins it).
//
// See docs/design/conformance-servers.md for the pinned specs it follows.
package daytonaserver

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/fakes/fakeserver"
	backendtest "github.com/sandboxio/terraform-provider-sandboxio/internal/testing/conformance"
)

// Config configures a Server.
type Config struct {
	APIKey string // the one key accepted as Bearer; required
	// Snapshots maps a snapshot name, or the image a declarative build
	// starts FROM, to the local Docker image it stands for; required.
	Snapshots map[string]string
	// DefaultSnapshot is used when a create names none; "" means the first
	// in sorted order.
	DefaultSnapshot string
	Docker          backends.Backend // the hardened Docker backend; required
	// Minute is how long one of Daytona's interval minutes lasts here;
	// 0 means a real minute. Tests shorten it to see auto-stop happen.
	Minute time.Duration
	// MaxCPU, MaxMemoryGB and MaxDiskGB are the per-sandbox limits of the
	// organization (Daytona's defaults: 4, 8, 10).
	MaxCPU, MaxMemoryGB, MaxDiskGB int64
	// MaxCommand bounds one command; 0 means 10 minutes.
	MaxCommand time.Duration
}

// Server is a running conformance server.
type Server struct {
	// URL is the server's root. The REST API is under /api
	// (DAYTONA_API_URL = URL + "/api"); the toolbox proxy under /toolbox.
	fakeserver.HTTP

	cfg Config

	mu        sync.Mutex
	sandboxes map[string]*sbx
	records   map[string]*Record
	fakeserver.Faults
	closed bool
	stop   chan struct{}
	wg     sync.WaitGroup
}

var _ backendtest.Faults = (*Server)(nil)

// APIURL is what DAYTONA_API_URL points at.
func (s *Server) APIURL() string { return s.URL + "/api" }

// Start listens on 127.0.0.1 on a free port and serves.
func Start(cfg Config) (*Server, error) {
	if cfg.APIKey == "" || cfg.Docker == nil || len(cfg.Snapshots) == 0 {
		return nil, errors.New("daytonaserver: APIKey, Docker and Snapshots are required")
	}
	if cfg.Minute <= 0 {
		cfg.Minute = time.Minute
	}
	if cfg.MaxCPU <= 0 {
		cfg.MaxCPU = 4
	}
	if cfg.MaxMemoryGB <= 0 {
		cfg.MaxMemoryGB = 8
	}
	if cfg.MaxDiskGB <= 0 {
		cfg.MaxDiskGB = 10
	}
	if cfg.MaxCommand <= 0 {
		cfg.MaxCommand = 10 * time.Minute
	}
	if cfg.DefaultSnapshot == "" {
		names := make([]string, 0, len(cfg.Snapshots))
		for n := range cfg.Snapshots {
			names = append(names, n)
		}
		sort.Strings(names)
		cfg.DefaultSnapshot = names[0]
	}
	s := &Server{cfg: cfg, sandboxes: map[string]*sbx{}, records: map[string]*Record{}, stop: make(chan struct{})}
	s.Answer = apiError
	if err := s.Listen("daytonaserver", "127.0.0.1:0", s.Handler()); err != nil {
		return nil, err
	}
	s.wg.Add(1)
	go s.autoStopLoop()
	return s, nil
}

// Handler routes REST and toolbox requests.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/sandbox", s.auth(backendtest.OpCreate, s.create))
	mux.HandleFunc("GET /api/sandbox", s.auth(backendtest.OpList, s.list))
	mux.HandleFunc("GET /api/sandbox/{id}", s.auth(backendtest.OpGet, s.get))
	mux.HandleFunc("DELETE /api/sandbox/{id}", s.auth(backendtest.OpKill, s.delete))
	mux.HandleFunc("GET /api/sandbox/{id}/toolbox-proxy-url", s.auth(backendtest.OpGet, s.proxyURL))
	mux.HandleFunc("POST /toolbox/{id}/process/session", s.auth(backendtest.OpRun, s.toolbox(s.createSession)))
	mux.HandleFunc("POST /toolbox/{id}/process/session/{sid}/exec", s.auth(backendtest.OpRun, s.toolbox(s.execSession)))
	mux.HandleFunc("DELETE /toolbox/{id}/process/session/{sid}", s.auth(backendtest.OpRun, s.toolbox(s.deleteSession)))
	mux.HandleFunc("POST /toolbox/{id}/files/bulk-upload", s.auth(backendtest.OpUpload, s.toolbox(s.bulkUpload)))
	mux.HandleFunc("POST /toolbox/{id}/files/permissions", s.auth(backendtest.OpUpload, s.toolbox(s.permissions)))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusNotFound, fmt.Sprintf("Cannot %s %s", r.Method, r.URL.Path))
	})
	return mux
}

// auth checks the bearer key (as the API and the toolbox proxy both do),
// then applies an armed fault, then serves.
func (s *Server) auth(op backendtest.Op, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.APIKey)) != 1 {
			apiError(w, http.StatusUnauthorized, "Invalid credentials")
			return
		}
		if s.Intercept(w, r, op, h) {
			return
		}
		h(w, r)
	}
}

// apiError answers as Daytona's API (NestJS) does.
func apiError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"statusCode": status, "message": msg, "error": http.StatusText(status)})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Close deletes every sandbox still there and stops serving.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.stop)
	open := slices.Collect(maps.Values(s.sandboxes))
	s.sandboxes = map[string]*sbx{}
	s.mu.Unlock()
	first := fakeserver.EndAll(open, func(sb *sbx) error { return sb.end("server closed") })
	s.Shutdown()
	s.wg.Wait()
	return first
}

// Record is what the server saw and did for one sandbox; it stays after the
// sandbox is gone, so a test can observe what a client asked for.
type Record struct {
	SandboxID          string
	Snapshot           string
	Labels, Env        map[string]string
	CPU, MemoryGB      int64
	DiskGB             int64
	NetworkBlockAll    bool
	AutoStopInterval   int64 // minutes
	AutoDeleteInterval int64 // minutes; 0 deletes on stop, negative never
	// LocalNetwork is what the Docker sandbox got: "none" or "bridge".
	LocalNetwork string
	// Unenforced lists what was asked and is not enforced exactly here.
	Unenforced []string
	DockerID   string
	Ended      string // why the sandbox ended; "" while it runs
	// Commands are the commands executed, as received.
	Commands []string
}

// Observe returns a copy of the record of a sandbox.
func (s *Server) Observe(id string) (Record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[id]
	if !ok {
		return Record{}, false
	}
	c := *r
	c.Commands = append([]string(nil), r.Commands...)
	return c, true
}

// Running lists the IDs of the sandboxes that exist (started or stopped).
func (s *Server) Running() []string {
	return fakeserver.SortedKeys(&s.mu, s.sandboxes)
}

func (s *Server) lookup(id string) (*sbx, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.sandboxes[id]
	return sb, ok
}

// remove takes a sandbox out of the set; it reports whether it was there.
func (s *Server) remove(id, why string) (*sbx, bool) {
	return fakeserver.Remove(&s.mu, s.sandboxes, s.records, id, func(r *Record) { r.Ended = why })
}

func (s *Server) updateRecord(id string, f func(*Record)) {
	fakeserver.Update(&s.mu, s.records, id, f)
}

// newID is a sandbox ID in Daytona's form (a UUID).
func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

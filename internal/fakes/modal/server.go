// Package modalserver is a local conformance server for the Modal backend: a
// gRPC server on the service interfaces of Modal's published protocol (as
// shipped in modal-go), with every command run in a local sandbox of the
// hardened Docker backend, never on the host. It is test support; the official
// SDK referees it (referee_test.go). What Docker cannot enforce (a CIDR allow
// list) runs stricter and is recorded as such, never reported as enforced.
//
// See docs/design/conformance-servers.md.
package modalserver

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	pb "github.com/modal-labs/libmodal/modal-go/proto/modal_proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker"
)

// Limits this server enforces on a sandbox, in Modal's units.
const (
	MaxTimeoutSecs = 24 * 60 * 60 // a sandbox lives at most a day
	MinMilliCPU    = 125
	MaxMilliCPU    = 64_000
	MinMemoryMB    = 128
	MaxMemoryMB    = 336 * 1024
	MaxTags        = 32
	MaxTagLen      = 256
	MaxCIDRs       = 100
	MaxEnvBytes    = 64 << 10 // all of one secret's keys and values
	MaxExecArgs    = 1 << 16  // total bytes of one exec's arguments (the SDK's own check)
	MaxOutput      = 64 << 20 // per stream of one exec
	jwtLifetime    = time.Hour
	methodPrefix   = "/modal.client.ModalClient/"
	routerPrefix   = "/modal.task_command_router.TaskCommandRouter/"
)

// Options configure a Server.
type Options struct {
	TokenID, TokenSecret string   // the one valid credential
	Apps                 []string // apps that exist, in every environment
	Environments         []string // environments that exist; "" (the default) always does
	// Backend opens the local Docker sandboxes; nil opens docker.New(docker.WithoutEgressObserver()): a Modal sandbox reports no blocked egress.
	Backend backends.Backend
	// Runtime is the Docker runtime the sandboxes use (runc when empty).
	Runtime string
	// VolumeRoot holds one directory per volume; a temporary directory when
	// empty (removed by Close).
	VolumeRoot string
}

// Server is a running conformance server.
type Server struct {
	pb.UnimplementedModalClientServer
	router routerServer

	opts    Options
	backend backends.Backend
	ownsBE  bool
	ownsVol bool
	grpc    *grpc.Server
	lis     net.Listener
	key     []byte // signs the JWTs it issues

	mu         sync.Mutex
	apps       map[string]string // env/name -> app id
	images     map[string]string // image id -> local image
	secrets    map[string]*secret
	volumes    map[string]*volume // id -> volume
	volByName  map[string]string  // env/name -> id
	sandboxes  map[string]*sandbox
	idem       map[string]string // idempotency key -> sandbox id
	execs      map[string]*exec
	files      map[string]*openFile
	fsOps      map[string]*fsOp
	faults     map[string][]Fault
	calls      []Call
	callMark   int // Calls before it are not counted by CountCallsSinceMark
	closed     bool
	sandboxSeq int
}

// Fault makes the next call of a method fail with a gRPC status.
type Fault struct {
	Code    codes.Code
	Message string
	// Header is sent as response metadata (Modal sends none that the SDK
	// reads; kept for tests of clients that might).
	Header map[string]string
	// Trailer is sent as response trailer metadata (a "retry-after" in
	// seconds, which the adapter honours on calls that are safe to repeat).
	Trailer map[string]string
	// After: the call is carried out first, and the status returned
	// instead of its answer, as when a connection drops after the server
	// acted (a create that happened, its answer lost).
	After bool
	// Delay holds the answer back (a stalled server), or less if the
	// client gives up first.
	Delay time.Duration
}

// Call is one RPC the server received, as recorded for tests.
type Call struct {
	Method string
	Code   codes.Code
	Time   time.Time
}

// Start serves on a loopback port. Its URL is what MODAL_SERVER_URL takes.
func Start(opts Options) (*Server, error) {
	s := &Server{opts: opts, apps: map[string]string{}, images: map[string]string{}, secrets: map[string]*secret{},
		volumes: map[string]*volume{}, volByName: map[string]string{}, sandboxes: map[string]*sandbox{},
		idem: map[string]string{}, execs: map[string]*exec{}, files: map[string]*openFile{}, fsOps: map[string]*fsOp{},
		faults: map[string][]Fault{}}
	s.router.s = s
	s.key = make([]byte, 32)
	if _, err := rand.Read(s.key); err != nil {
		return nil, err
	}
	if opts.TokenID == "" || opts.TokenSecret == "" {
		return nil, fmt.Errorf("modalserver: a token id and secret are required")
	}
	for _, env := range append([]string{""}, opts.Environments...) {
		for _, a := range opts.Apps {
			s.apps[env+"/"+a] = "ap-" + randomID()
		}
	}
	s.backend = opts.Backend
	if s.backend == nil {
		b, err := docker.New(docker.WithoutEgressObserver())
		if err != nil {
			return nil, fmt.Errorf("modalserver: docker: %w", err)
		}
		s.backend, s.ownsBE = b, true
	}
	if s.opts.VolumeRoot == "" {
		dir, err := os.MkdirTemp("", "modalserver-volumes-")
		if err != nil {
			return nil, err
		}
		s.opts.VolumeRoot, s.ownsVol = dir, true
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.lis = lis
	s.grpc = grpc.NewServer(grpc.ChainUnaryInterceptor(s.unaryGate), grpc.ChainStreamInterceptor(s.streamGate),
		grpc.MaxRecvMsgSize(100<<20))
	pb.RegisterModalClientServer(s.grpc, s)
	pb.RegisterTaskCommandRouterServer(s.grpc, &s.router)
	go func() { _ = s.grpc.Serve(lis) }()
	return s, nil
}

// URL is the control plane's address, http://127.0.0.1:PORT (plaintext, as
// the SDK dials an http:// server URL).
func (s *Server) URL() string { return "http://" + s.lis.Addr().String() }

// routerURL is the command router's address as Modal hands it out: https.
// The SDK dials it without TLS when the control plane is on localhost.
func (s *Server) routerURL() string { return "https://" + s.lis.Addr().String() }

// Close terminates every sandbox (their Docker sandboxes are removed),
// stops serving and removes a temporary volume root.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	var live []*sandbox
	for _, sb := range s.sandboxes {
		live = append(live, sb)
	}
	s.mu.Unlock()
	var firstErr error
	for _, sb := range live {
		if err := sb.finish(pb.GenericResult_GENERIC_STATUS_TERMINATED, "server closed"); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	s.grpc.Stop()
	if s.ownsBE {
		_ = s.backend.Close()
	}
	if s.ownsVol {
		_ = os.RemoveAll(s.opts.VolumeRoot)
	}
	return firstErr
}

// Inject queues faults for a method (its short name, e.g. "SandboxCreate"
// or "TaskExecStart"): each of the next calls takes one.
func (s *Server) Inject(method string, faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[method] = append(s.faults[method], faults...)
}

// SetFaults replaces every queued fault with these (none: disarm all) and
// marks the calls received so far as not counted by CountCallsSinceMark.
func (s *Server) SetFaults(method string, faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = map[string][]Fault{}
	if method != "" && len(faults) > 0 {
		s.faults[method] = append([]Fault(nil), faults...)
	}
	s.callMark = len(s.calls)
}

// CountCallsSinceMark counts the calls of one method since SetFaults.
func (s *Server) CountCallsSinceMark(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls[s.callMark:] {
		if c.Method == method {
			n++
		}
	}
	return n
}

// Calls returns the calls received so far, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// CountCalls counts the calls of one method.
func (s *Server) CountCalls(method string) int {
	n := 0
	for _, c := range s.Calls() {
		if c.Method == method {
			n++
		}
	}
	return n
}

// AddSecret stores a named secret (as `modal secret create` would).
func (s *Server) AddSecret(env, name string, values map[string]string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := "st-" + randomID()
	s.secrets[id] = &secret{id: id, name: name, env: env, values: copyMap(values)}
	return id
}

func (s *Server) takeFault(method string) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.faults[method]
	if len(q) == 0 {
		return Fault{}, false
	}
	s.faults[method] = q[1:]
	return q[0], true
}

func (s *Server) record(method string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, Call{Method: method, Code: status.Code(err), Time: time.Now()})
}

// unaryGate authenticates, refuses unknown fields, applies injected faults
// and records the call.
func (s *Server) unaryGate(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	method := shortName(info.FullMethod)
	resp, err := s.gate(ctx, info.FullMethod, true, req, func(ctx context.Context) (any, error) { return h(ctx, req) })
	s.record(method, err)
	return resp, err
}

func (s *Server) streamGate(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	method := shortName(info.FullMethod)
	// The request of a server-streaming call is read by the handler; the
	// unknown-field check runs there (checkFields).
	_, err := s.gate(ss.Context(), info.FullMethod, false, nil, func(context.Context) (any, error) { return nil, h(srv, ss) })
	s.record(method, err)
	return err
}

func (s *Server) gate(ctx context.Context, full string, unary bool, req any, call func(context.Context) (any, error)) (any, error) {
	method := shortName(full)
	if err := s.authenticate(ctx, full, unary); err != nil {
		return nil, err
	}
	if m, ok := req.(proto.Message); ok {
		if err := checkFields(m); err != nil {
			return nil, err
		}
	}
	f, faulty := s.takeFault(method)
	if faulty && f.Delay > 0 {
		t := time.NewTimer(f.Delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	if faulty && !f.After {
		return nil, f.status(ctx)
	}
	resp, err := call(ctx)
	if faulty && err == nil {
		return nil, f.status(ctx)
	}
	return resp, err
}

func (f Fault) status(ctx context.Context) error {
	if len(f.Header) > 0 {
		_ = grpc.SetHeader(ctx, metadata.New(f.Header))
	}
	if len(f.Trailer) > 0 {
		_ = grpc.SetTrailer(ctx, metadata.New(f.Trailer))
	}
	msg := f.Message
	if msg == "" {
		msg = "injected fault"
	}
	return status.Error(f.Code, msg)
}

// authenticate checks what Modal checks: the client's type and version
// headers, the token id and secret (every control-plane call), the auth
// token the SDK fetched with them (every unary call but AuthTokenGet: the
// SDK sends it on unary calls only), and on the command router the
// task-scoped JWT. A wrong or missing credential is Unauthenticated; the
// message never echoes it.
func (s *Server) authenticate(ctx context.Context, full string, unary bool) error {
	md, _ := metadata.FromIncomingContext(ctx)
	get := func(k string) string {
		if v := md.Get(k); len(v) == 1 {
			return v[0]
		}
		return ""
	}
	if strings.HasPrefix(full, routerPrefix) {
		tok, ok := strings.CutPrefix(get("authorization"), "Bearer ")
		if !ok || s.verifyJWT(tok, "router") == "" {
			return status.Error(codes.Unauthenticated, "missing or invalid command router token")
		}
		return nil
	}
	if get("x-modal-client-type") == "" || get("x-modal-client-version") == "" {
		return status.Error(codes.FailedPrecondition, "client type and version headers are required")
	}
	id, secret := get("x-modal-token-id"), get("x-modal-token-secret")
	if !hmac.Equal([]byte(id), []byte(s.opts.TokenID)) || !hmac.Equal([]byte(secret), []byte(s.opts.TokenSecret)) {
		return status.Error(codes.Unauthenticated, "Token missing or invalid. Check MODAL_TOKEN_ID and MODAL_TOKEN_SECRET.")
	}
	if full == methodPrefix+"AuthTokenGet" || !unary {
		return nil
	}
	if s.verifyJWT(get("x-modal-auth-token"), "client") == "" {
		return status.Error(codes.Unauthenticated, "missing or expired auth token")
	}
	return nil
}

// checkFields refuses a request that carries fields this protocol version
// does not define, at any depth: Modal's server would not act on them, and
// a client that sends them expects something that would not happen.
func checkFields(m proto.Message) error {
	var bad string
	var walk func(protoreflect.Message, string)
	walk = func(r protoreflect.Message, at string) {
		if bad != "" {
			return
		}
		if len(r.GetUnknown()) > 0 {
			bad = at
			return
		}
		r.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch {
			case fd.IsList() && fd.Message() != nil:
				for i := 0; i < v.List().Len(); i++ {
					walk(v.List().Get(i).Message(), at+"."+string(fd.Name()))
				}
			case fd.IsMap() && fd.MapValue().Message() != nil:
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					walk(mv.Message(), at+"."+string(fd.Name()))
					return true
				})
			case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
				walk(v.Message(), at+"."+string(fd.Name()))
			}
			return bad == ""
		})
	}
	walk(m.ProtoReflect(), string(m.ProtoReflect().Descriptor().Name()))
	if bad != "" {
		return status.Errorf(codes.InvalidArgument, "%s has fields this API does not define", bad)
	}
	return nil
}

// issueJWT makes an HS256 JWT with an exp claim (the SDK reads exp to
// schedule its refresh) and a scope.
func (s *Server) issueJWT(scope, subject string) string {
	head := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	claims, _ := json.Marshal(map[string]any{"exp": time.Now().Add(jwtLifetime).Unix(), "scope": scope, "sub": subject})
	body := head + "." + base64.RawURLEncoding.EncodeToString(claims)
	mac := hmac.New(sha256.New, s.key)
	mac.Write([]byte(body))
	return body + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// verifyJWT returns the subject of a valid, unexpired token of the scope.
func (s *Server) verifyJWT(tok, scope string) string {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return ""
	}
	mac := hmac.New(sha256.New, s.key)
	mac.Write([]byte(parts[0] + "." + parts[1]))
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || !hmac.Equal(sig, mac.Sum(nil)) {
		return ""
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var c struct {
		Exp   int64  `json:"exp"`
		Scope string `json:"scope"`
		Sub   string `json:"sub"`
	}
	if json.Unmarshal(raw, &c) != nil || c.Scope != scope || time.Now().Unix() >= c.Exp || c.Sub == "" {
		return ""
	}
	return c.Sub
}

// AuthTokenGet issues the short-lived token the SDK sends on every call.
func (s *Server) AuthTokenGet(context.Context, *pb.AuthTokenGetRequest) (*pb.AuthTokenGetResponse, error) {
	return pb.AuthTokenGetResponse_builder{Token: s.issueJWT("client", s.opts.TokenID)}.Build(), nil
}

func shortName(full string) string {
	if i := strings.LastIndexByte(full, '/'); i >= 0 {
		return full[i+1:]
	}
	return full
}

func randomID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func invalid(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}

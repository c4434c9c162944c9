package vercelserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// maxBody bounds a JSON request body.
const maxBody = 1 << 20

// Limits the server enforces on a create besides Vercel's documented ones
// (5 tags, 8 vCPUs, the plan's timeout); they keep one request from holding
// the server's memory.
const (
	maxTagKey    = 256
	maxTagValue  = 256
	maxEnvVars   = 256
	maxEnvValue  = 64 << 10
	maxNetEntrys = 256
)

// apiError writes Vercel's error shape, {"error": {"code", "message"}}.
func apiError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"code": code, "message": msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// auth checks the bearer token and the team, then applies an armed fault,
// then serves. Vercel answers a bad token with 403 (invalidToken) and a
// team the token cannot use with 403 too.
func (s *Server) auth(op Op, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || tok == "" {
			s.Take(op)
			writeJSON(w, http.StatusForbidden, map[string]any{"error": map[string]any{"code": "forbidden",
				"message": "The request is missing an authentication token", "missingToken": true}})
			return
		}
		if !s.tokenOK(tok) {
			s.Take(op)
			writeJSON(w, http.StatusForbidden, map[string]any{"error": map[string]any{"code": "forbidden",
				"message": "Not authorized", "invalidToken": true}})
			return
		}
		if team := r.URL.Query().Get("teamId"); team != s.cfg.TeamID {
			s.Take(op)
			apiError(w, http.StatusForbidden, "forbidden", "You don't have permission to access this team")
			return
		}
		if s.Intercept(w, r, op, h) {
			return
		}
		h(w, r)
	}
}

func (s *Server) tokenOK(tok string) bool {
	for _, t := range s.cfg.Tokens {
		if constantEq(tok, t) {
			return true
		}
	}
	return false
}

// decodeStrict decodes a JSON body, refusing unknown fields, mistyped
// values, trailing data and bodies over maxBody.
func decodeStrict(r *http.Request, v any) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return fmt.Errorf("reading body: %w", err)
	}
	if len(body) > maxBody {
		return fmt.Errorf("request body exceeds %d bytes", maxBody)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid request body: %w", err)
	}
	if dec.More() {
		return fmt.Errorf("invalid request body: data after the JSON object")
	}
	return nil
}

// createReq is the create body the SDK sends (api-client createSandbox).
// Fields this server does not implement are decoded raw so that a non-null
// value is refused with a clear 400, never silently ignored.
type createReq struct {
	ProjectID          *string           `json:"projectId"`
	Ports              []int             `json:"ports"`
	Source             json.RawMessage   `json:"source"`
	Timeout            *int64            `json:"timeout"`
	Resources          *resources        `json:"resources"`
	Runtime            *string           `json:"runtime"`
	Image              *string           `json:"image"`
	Name               *string           `json:"name"`
	Persistent         *bool             `json:"persistent"`
	NetworkPolicy      json.RawMessage   `json:"networkPolicy"`
	NetworkID          json.RawMessage   `json:"networkId"`
	Env                map[string]string `json:"env"`
	Tags               map[string]string `json:"tags"`
	SnapshotExpiration json.RawMessage   `json:"snapshotExpiration"`
	KeepLastSnapshots  json.RawMessage   `json:"keepLastSnapshots"`
	Mounts             json.RawMessage   `json:"mounts"`
	Region             *string           `json:"region"`
	FailoverRegions    json.RawMessage   `json:"failoverRegions"`
}

type resources struct {
	VCPUs *int `json:"vcpus"`
}

// netPolicy is a network policy as stored and returned: a mode, and for
// "custom" the lists (the SDK's legacy response form).
type netPolicy struct {
	Mode           string   `json:"mode"`
	AllowedDomains []string `json:"allowedDomains,omitempty"`
	AllowedCIDRs   []string `json:"allowedCIDRs,omitempty"`
	DeniedCIDRs    []string `json:"deniedCIDRs,omitempty"`
}

var (
	envName  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	nameRe   = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_-]{0,62}$`)
	domainRe = regexp.MustCompile(`^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,62}$`)
	regionRe = regexp.MustCompile(`^[a-z]{3}[0-9]$`)
)

// parseNetworkPolicy reads the request form: {"mode": "allow-all" |
// "deny-all"}, or {"allow": [domains], "subnets": {"allow", "deny"}}.
// Per-domain rules (credential injection, forwarding) are refused here.
func parseNetworkPolicy(raw json.RawMessage) (netPolicy, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return netPolicy{Mode: "allow-all"}, nil
	}
	var p struct {
		Mode    *string         `json:"mode"`
		Allow   json.RawMessage `json:"allow"`
		Subnets *struct {
			Allow []string `json:"allow"`
			Deny  []string `json:"deny"`
		} `json:"subnets"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return netPolicy{}, fmt.Errorf("invalid networkPolicy: %w", err)
	}
	if p.Mode != nil {
		if *p.Mode != "allow-all" && *p.Mode != "deny-all" || len(p.Allow) > 0 || p.Subnets != nil {
			return netPolicy{}, fmt.Errorf(`invalid networkPolicy: mode must be "allow-all" or "deny-all", alone`)
		}
		return netPolicy{Mode: *p.Mode}, nil
	}
	out := netPolicy{Mode: "custom"}
	if len(p.Allow) > 0 && string(p.Allow) != "null" {
		if err := json.Unmarshal(p.Allow, &out.AllowedDomains); err != nil {
			return netPolicy{}, fmt.Errorf("invalid networkPolicy.allow: per-domain rules are not supported by this conformance server; a list of domains is")
		}
	}
	if p.Subnets != nil {
		out.AllowedCIDRs, out.DeniedCIDRs = p.Subnets.Allow, p.Subnets.Deny
	}
	if len(out.AllowedDomains)+len(out.AllowedCIDRs)+len(out.DeniedCIDRs) > maxNetEntrys {
		return netPolicy{}, fmt.Errorf("invalid networkPolicy: more than %d entries", maxNetEntrys)
	}
	for _, d := range out.AllowedDomains {
		if len(d) > 253 || !domainRe.MatchString(d) && d != "*" {
			return netPolicy{}, fmt.Errorf("invalid networkPolicy.allow entry %q: must be a domain name (a leading *. wildcard allowed)", d)
		}
	}
	for _, c := range append(append([]string(nil), out.AllowedCIDRs...), out.DeniedCIDRs...) {
		if _, err := netip.ParsePrefix(c); err != nil {
			return netPolicy{}, fmt.Errorf("invalid networkPolicy.subnets entry %q: must be a CIDR block", c)
		}
	}
	return out, nil
}

// validateCreate checks the body as Vercel does and refuses what this
// server does not implement; it returns the runtime and the policy.
func (s *Server) validateCreate(req *createReq, path string) (string, netPolicy, int, error) {
	bad := func(f string, a ...any) (string, netPolicy, int, error) {
		return "", netPolicy{}, http.StatusBadRequest, fmt.Errorf(f, a...)
	}
	if req.ProjectID == nil || *req.ProjectID == "" {
		return bad("projectId is required")
	}
	if *req.ProjectID != s.cfg.ProjectID {
		return "", netPolicy{}, http.StatusNotFound, errors.New("project not found")
	}
	for name, raw := range map[string]json.RawMessage{"source": req.Source, "networkId": req.NetworkID, "snapshotExpiration": req.SnapshotExpiration,
		"keepLastSnapshots": req.KeepLastSnapshots, "mounts": req.Mounts, "failoverRegions": req.FailoverRegions} {
		if len(raw) > 0 && string(raw) != "null" {
			return bad("%s is not supported by this conformance server", name)
		}
	}
	if len(req.Ports) > 0 {
		return bad("ports are not supported by this conformance server")
	}
	if req.Image != nil {
		return bad("image is not supported by this conformance server; use runtime")
	}
	if req.Persistent != nil && *req.Persistent {
		return bad("persistent sandboxes are not supported by this conformance server")
	}
	runtime := "node24" // the default environment
	if req.Runtime != nil {
		runtime = *req.Runtime
	} else if path == "/v2/sandboxes" {
		return bad("runtime is required on /v2/sandboxes")
	}
	if _, ok := s.cfg.Runtimes[runtime]; !ok {
		return bad("invalid runtime %q: must be one of %s", runtime, strings.Join(s.runtimeNames(), ", "))
	}
	if req.Timeout != nil && (*req.Timeout < 1000 || time.Duration(*req.Timeout)*time.Millisecond > s.cfg.MaxTimeout) {
		return bad("timeout must be between 1000 and %d milliseconds", s.cfg.MaxTimeout.Milliseconds())
	}
	if req.Resources != nil && (req.Resources.VCPUs == nil || *req.Resources.VCPUs < 1 || *req.Resources.VCPUs > MaxVCPUs) {
		return bad("resources.vcpus must be an integer between 1 and %d", MaxVCPUs)
	}
	if req.Name != nil && !nameRe.MatchString(*req.Name) {
		return bad("invalid name %q", *req.Name)
	}
	if req.Region != nil && !regionRe.MatchString(*req.Region) {
		return bad("invalid region %q", *req.Region)
	}
	if len(req.Tags) > MaxTags {
		return bad("tags: at most %d tags are allowed, got %d", MaxTags, len(req.Tags))
	}
	for k, v := range req.Tags {
		if k == "" || len(k) > maxTagKey || len(v) > maxTagValue || strings.Contains(k, ":") {
			return bad("invalid tag %q: keys are 1 to %d characters without ':', values at most %d", k, maxTagKey, maxTagValue)
		}
	}
	if len(req.Env) > maxEnvVars {
		return bad("env has %d entries, at most %d are accepted", len(req.Env), maxEnvVars)
	}
	for k, v := range req.Env {
		if !envName.MatchString(k) || len(v) > maxEnvValue {
			return bad("env key %q is not a variable name or its value is too long", k)
		}
	}
	pol, err := parseNetworkPolicy(req.NetworkPolicy)
	if err != nil {
		return bad("%s", err.Error())
	}
	return runtime, pol, 0, nil
}

func (s *Server) runtimeNames() []string {
	var out []string
	for k := range s.cfg.Runtimes {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, path string) {
	var req createReq
	if err := decodeStrict(r, &req); err != nil {
		apiError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	runtime, pol, status, err := s.validateCreate(&req, path)
	if err != nil {
		code := "bad_request"
		if status == http.StatusNotFound {
			code = "not_found"
		}
		apiError(w, status, code, err.Error())
		return
	}
	name := randomID("sbx_", 12)
	if req.Name != nil {
		name = *req.Name
	}
	s.mu.Lock()
	_, exists := s.sandboxes[name]
	s.mu.Unlock()
	if exists {
		apiError(w, http.StatusConflict, "conflict", fmt.Sprintf("a sandbox named %q already exists", name))
		return
	}
	sb, err := s.startSandbox(r.Context(), &req, name, runtime, pol, path)
	if err != nil {
		apiError(w, http.StatusInternalServerError, "internal_error", "failed to create sandbox: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, sb.withSession())
}

// list serves GET /v2/sandboxes: the project's sandboxes, filtered by one
// tag and a name prefix, newest first, a page at a time.
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if p := q.Get("project"); p != "" && p != s.cfg.ProjectID {
		apiError(w, http.StatusNotFound, "not_found", "Project not found")
		return
	}
	tags := q["tags"]
	if len(tags) > 1 {
		apiError(w, http.StatusBadRequest, "bad_request", "Filtering by multiple tags is not supported")
		return
	}
	var tagKey, tagVal string
	if len(tags) == 1 {
		var ok bool
		if tagKey, tagVal, ok = strings.Cut(tags[0], ":"); !ok || tagKey == "" {
			apiError(w, http.StatusBadRequest, "bad_request", "tags must be key:value")
			return
		}
	}
	limit := 50
	if l := q.Get("limit"); l != "" {
		var err error
		if limit, err = strconv.Atoi(l); err != nil || limit < 1 || limit > 100 {
			apiError(w, http.StatusBadRequest, "bad_request", "limit must be an integer between 1 and 100")
			return
		}
	}
	all := s.matching(q.Get("namePrefix"), tagKey, tagVal, len(tags) == 1)
	start := 0
	if c := q.Get("cursor"); c != "" {
		var err error
		if start, err = strconv.Atoi(c); err != nil || start < 0 || start > len(all) {
			apiError(w, http.StatusBadRequest, "bad_request", "invalid cursor")
			return
		}
	}
	end := min(start+limit, len(all))
	var next *string
	if end < len(all) {
		n := strconv.Itoa(end)
		next = &n
	}
	writeJSON(w, http.StatusOK, map[string]any{"sandboxes": all[start:end], "pagination": map[string]any{"count": end - start, "next": next}})
}

func (s *Server) matching(prefix, tagKey, tagVal string, byTag bool) []sandboxJSON {
	s.mu.Lock()
	sbs := make([]*sbx, 0, len(s.sandboxes))
	for _, sb := range s.sandboxes {
		sbs = append(sbs, sb)
	}
	s.mu.Unlock()
	sort.Slice(sbs, func(i, j int) bool { return sbs[i].created.After(sbs[j].created) })
	out := []sandboxJSON{}
	for _, sb := range sbs {
		if !strings.HasPrefix(sb.name, prefix) {
			continue
		}
		if v, ok := sb.tags[tagKey]; byTag && (!ok || v != tagVal) {
			continue
		}
		out = append(out, sb.sandboxJSON())
	}
	return out
}

func (s *Server) byName(w http.ResponseWriter, r *http.Request) (*sbx, bool) {
	if p := r.URL.Query().Get("projectId"); p != "" && p != s.cfg.ProjectID {
		apiError(w, http.StatusNotFound, "not_found", "Project not found")
		return nil, false
	}
	s.mu.Lock()
	sb, ok := s.sandboxes[r.PathValue("name")]
	s.mu.Unlock()
	if !ok {
		apiError(w, http.StatusNotFound, "not_found", fmt.Sprintf("Sandbox %q not found", r.PathValue("name")))
	}
	return sb, ok
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	sb, ok := s.byName(w, r)
	if !ok {
		return
	}
	if r.URL.Query().Get("resume") == "true" && !sb.running() {
		apiError(w, http.StatusBadRequest, "bad_request", "resuming a stopped sandbox is not supported by this conformance server")
		return
	}
	writeJSON(w, http.StatusOK, sb.withSession())
}

// delete stops the sandbox's session, if it runs, and removes the sandbox.
func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	sb, ok := s.byName(w, r)
	if !ok {
		return
	}
	if err := sb.end("deleted"); err != nil {
		apiError(w, http.StatusInternalServerError, "internal_error", "failed to stop the sandbox: "+err.Error())
		return
	}
	s.mu.Lock()
	delete(s.sandboxes, sb.name)
	delete(s.sessions, sb.sessionID)
	if rec := s.records[sb.name]; rec != nil {
		rec.Deleted = true
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"sandbox": sb.sandboxJSON()})
}

// session resolves the session of the path for a session handler: 404 for
// an unknown one, 410 for one that has stopped (the SDK's "stopped").
func (s *Server) session(h func(http.ResponseWriter, *http.Request, *sbx)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		sb, ok := s.sessions[r.PathValue("sid")]
		s.mu.Unlock()
		if !ok {
			apiError(w, http.StatusNotFound, "not_found", fmt.Sprintf("Session %q not found", r.PathValue("sid")))
			return
		}
		h(w, r, sb)
	}
}

func (s *Server) getSession(w http.ResponseWriter, _ *http.Request, sb *sbx) {
	writeJSON(w, http.StatusOK, map[string]any{"session": sb.sessionJSON(), "routes": []any{}})
}

func (s *Server) stop(w http.ResponseWriter, _ *http.Request, sb *sbx) {
	if err := sb.end("stopped"); err != nil {
		apiError(w, http.StatusInternalServerError, "internal_error", "failed to stop the session: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"session": sb.sessionJSON(), "sandbox": sb.sandboxJSON()})
}

// gone answers a call on a session that has stopped.
func gone(w http.ResponseWriter, sb *sbx) {
	apiError(w, http.StatusGone, "sandbox_stopped", fmt.Sprintf("Sandbox session %s is %s", sb.sessionID, sb.status()))
}

package e2bserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"time"
)

// maxBody bounds a control-plane request body.
const maxBody = 1 << 20

// Limits the server enforces on a create. E2B documents none for metadata;
// these keep one request from holding the server's memory.
const (
	maxMetadata   = 64
	maxMetaKey    = 256
	maxMetaValue  = 1024
	maxEnvVars    = 256
	maxEnvValue   = 64 << 10
	maxNetEntries = 1024
)

// newSandbox is NewSandbox (POST /sandboxes) and NewSandboxV2 (POST
// /v2/sandboxes; no "secure", default timeout 300). Fields the server does
// not implement are decoded raw so that a non-null value is refused with a
// clear 400, never silently ignored; any other unknown field is a 400 too.
type newSandbox struct {
	TemplateID          *string           `json:"templateID"`
	Timeout             *json.Number      `json:"timeout"`
	AutoPause           *bool             `json:"autoPause"`
	AutoPauseMemory     *bool             `json:"autoPauseMemory"`
	AutoResume          json.RawMessage   `json:"autoResume"`
	Secure              *bool             `json:"secure"`
	AllowInternetAccess *bool             `json:"allow_internet_access"`
	Network             *networkConfig    `json:"network"`
	Metadata            map[string]string `json:"metadata"`
	EnvVars             map[string]string `json:"envVars"`
	MCP                 json.RawMessage   `json:"mcp"`
	IAM                 json.RawMessage   `json:"iam"`
	VolumeMounts        json.RawMessage   `json:"volumeMounts"`
}

type networkConfig struct {
	AllowPublicTraffic *bool           `json:"allowPublicTraffic"`
	AllowOut           []string        `json:"allowOut"`
	DenyOut            []string        `json:"denyOut"`
	EgressProxy        json.RawMessage `json:"egressProxy"`
	MaskRequestHost    *string         `json:"maskRequestHost"`
	Rules              json.RawMessage `json:"rules"`
	HTTPSPorts         json.RawMessage `json:"httpsPorts"`
}

// sandboxResp is the Sandbox schema.
type sandboxResp struct {
	TemplateID         string  `json:"templateID"`
	SandboxID          string  `json:"sandboxID"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    string  `json:"envdAccessToken"`
	TrafficAccessToken *string `json:"trafficAccessToken"`
	Domain             *string `json:"domain"`
}

// listedSandbox is the ListedSandbox schema.
type listedSandbox struct {
	TemplateID   string            `json:"templateID"`
	SandboxID    string            `json:"sandboxID"`
	ClientID     string            `json:"clientID"`
	StartedAt    time.Time         `json:"startedAt"`
	EndAt        time.Time         `json:"endAt"`
	CPUCount     int               `json:"cpuCount"`
	MemoryMB     int               `json:"memoryMB"`
	DiskSizeMB   int               `json:"diskSizeMB"`
	Metadata     map[string]string `json:"metadata"`
	State        string            `json:"state"`
	EnvdVersion  string            `json:"envdVersion"`
	VolumeMounts []struct{}        `json:"volumeMounts"`
}

// apiError writes E2B's Error schema.
func apiError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"code": status, "message": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// auth checks X-API-Key, then applies an armed fault, then serves.
func (s *Server) auth(op Op, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.apiKeyOK(r.Header.Get("X-API-Key")) {
			s.Take(op) // counted all the same
			apiError(w, http.StatusUnauthorized, "Invalid API key, please visit https://e2b.dev/docs/api-key")
			return
		}
		if s.Intercept(w, r, op, h) {
			return
		}
		h(w, r)
	}
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
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("request body has an error: %w", err)
	}
	if dec.More() {
		return fmt.Errorf("request body has data after the JSON object")
	}
	return nil
}

// int32Seconds parses an int32 number of seconds, minimum 0.
func int32Seconds(n json.Number) (int64, error) {
	v, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil || v < 0 || v > math.MaxInt32 {
		return 0, fmt.Errorf("timeout must be an integer between 0 and %d, got %s", math.MaxInt32, n)
	}
	return v, nil
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, v2 bool) {
	var req newSandbox
	if err := decodeStrict(r, &req); err != nil {
		apiError(w, http.StatusBadRequest, err.Error())
		return
	}
	if v2 && req.Secure != nil {
		apiError(w, http.StatusBadRequest, `request body has an error: unknown field "secure"`)
		return
	}
	if err := s.validateCreate(&req); err != nil {
		apiError(w, http.StatusBadRequest, err.Error())
		return
	}
	tpl, ok := s.cfg.Templates[*req.TemplateID]
	if !ok {
		apiError(w, http.StatusNotFound, fmt.Sprintf("template '%s' not found", *req.TemplateID))
		return
	}
	timeout := 15 * time.Second
	if v2 {
		timeout = 300 * time.Second
	}
	if req.Timeout != nil {
		secs, _ := int32Seconds(*req.Timeout)
		timeout = time.Duration(secs) * time.Second
	}
	if timeout > s.cfg.MaxTimeout {
		apiError(w, http.StatusBadRequest, fmt.Sprintf("Timeout cannot be greater than %d hours", int(s.cfg.MaxTimeout.Hours())))
		return
	}
	path := "/sandboxes"
	if v2 {
		path = "/v2/sandboxes"
	}
	sb, err := s.startSandbox(r.Context(), &req, tpl, timeout, path)
	if err != nil {
		apiError(w, http.StatusInternalServerError, "failed to create sandbox: "+err.Error())
		return
	}
	writeJSON(w, http.StatusCreated, sandboxResp{TemplateID: sb.templateID, SandboxID: sb.id, ClientID: "6532622b",
		EnvdVersion: EnvdVersion, EnvdAccessToken: sb.token})
}

var (
	envName  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	hostname = regexp.MustCompile(`^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,62}$`)
)

// validateCreate checks what the schema and E2B's validation say, and
// refuses what this server does not implement.
func (s *Server) validateCreate(req *newSandbox) error {
	if req.TemplateID == nil || trimmed(*req.TemplateID) == "" {
		return fmt.Errorf("request body has an error: templateID is required")
	}
	if req.Timeout != nil {
		if _, err := int32Seconds(*req.Timeout); err != nil {
			return err
		}
	}
	for name, raw := range map[string]json.RawMessage{"autoResume": req.AutoResume, "mcp": req.MCP, "iam": req.IAM, "volumeMounts": req.VolumeMounts} {
		if len(raw) > 0 && string(raw) != "null" {
			return fmt.Errorf("%s is not supported by this conformance server", name)
		}
	}
	if req.AutoPause != nil && *req.AutoPause {
		return fmt.Errorf("autoPause is not supported by this conformance server")
	}
	if len(req.Metadata) > maxMetadata {
		return fmt.Errorf("metadata has %d entries, at most %d are accepted", len(req.Metadata), maxMetadata)
	}
	for k, v := range req.Metadata {
		if k == "" || len(k) > maxMetaKey || len(v) > maxMetaValue {
			return fmt.Errorf("metadata key %q or its value is empty or too long", k)
		}
	}
	if len(req.EnvVars) > maxEnvVars {
		return fmt.Errorf("envVars has %d entries, at most %d are accepted", len(req.EnvVars), maxEnvVars)
	}
	for k, v := range req.EnvVars {
		if !envName.MatchString(k) || len(v) > maxEnvValue {
			return fmt.Errorf("envVars key %q is not a variable name or its value is too long", k)
		}
	}
	return validateNetwork(req.Network)
}

func validateNetwork(n *networkConfig) error {
	if n == nil {
		return nil
	}
	for name, raw := range map[string]json.RawMessage{"network.egressProxy": n.EgressProxy, "network.rules": n.Rules, "network.httpsPorts": n.HTTPSPorts} {
		if len(raw) > 0 && string(raw) != "null" {
			return fmt.Errorf("%s is not supported by this conformance server", name)
		}
	}
	if n.MaskRequestHost != nil {
		return fmt.Errorf("network.maskRequestHost is not supported by this conformance server")
	}
	if len(n.AllowOut)+len(n.DenyOut) > maxNetEntries {
		return fmt.Errorf("network has more than %d allowOut and denyOut entries", maxNetEntries)
	}
	for _, e := range n.AllowOut {
		if !isCIDROrIP(e) && !hostname.MatchString(e) {
			return fmt.Errorf("invalid allowOut entry %q: must be a CIDR block, an IP address or a domain name", e)
		}
	}
	for _, e := range n.DenyOut {
		if !isCIDROrIP(e) {
			return fmt.Errorf("invalid denyOut entry %q: must be a CIDR block or an IP address (domain names are not supported for deny rules)", e)
		}
	}
	return nil
}

func isCIDROrIP(s string) bool {
	if _, err := netip.ParsePrefix(s); err == nil {
		return true
	}
	_, err := netip.ParseAddr(s)
	return err == nil
}

// list serves GET /v2/sandboxes: the running sandboxes carrying every
// metadata pair of the query, newest first, a page at a time.
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	filter, err := parseMetadataQuery(q.Get("metadata"))
	if err != nil {
		apiError(w, http.StatusBadRequest, err.Error())
		return
	}
	limit := 100
	if l := q.Get("limit"); l != "" {
		if limit, err = strconv.Atoi(l); err != nil || limit < 1 || limit > 100 {
			apiError(w, http.StatusBadRequest, "limit must be an integer between 1 and 100")
			return
		}
	}
	if st := q.Get("state"); st != "" {
		for _, v := range splitComma(st) {
			if v != "running" && v != "paused" {
				apiError(w, http.StatusBadRequest, fmt.Sprintf("invalid state %q", v))
				return
			}
		}
	}
	all := s.matching(filter)
	start := 0
	if tok := q.Get("nextToken"); tok != "" {
		if start, err = strconv.Atoi(tok); err != nil || start < 0 || start > len(all) {
			apiError(w, http.StatusBadRequest, "invalid nextToken")
			return
		}
	}
	end := min(start+limit, len(all))
	if end < len(all) {
		w.Header().Set("X-Next-Token", strconv.Itoa(end))
	}
	w.Header().Set("X-Total-Running", strconv.Itoa(len(all)))
	writeJSON(w, http.StatusOK, all[start:end])
}

// parseMetadataQuery reads the metadata filter as E2B documents it: a query
// string whose keys and values are each URL-encoded once more.
func parseMetadataQuery(raw string) (map[string]string, error) {
	out := map[string]string{}
	if raw == "" {
		return out, nil
	}
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return nil, fmt.Errorf("invalid metadata query: %w", err)
	}
	for k, vs := range vals {
		key, err1 := url.QueryUnescape(k)
		val, err2 := url.QueryUnescape(vs[0])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("invalid metadata query: key or value %q is not URL-encoded", k)
		}
		out[key] = val
	}
	return out, nil
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

func (s *Server) matching(filter map[string]string) []listedSandbox {
	s.mu.Lock()
	sbs := make([]*sbx, 0, len(s.sandboxes))
	for _, sb := range s.sandboxes {
		sbs = append(sbs, sb)
	}
	s.mu.Unlock()
	now := time.Now()
	out := []listedSandbox{}
	for _, sb := range sbs {
		end := sb.endAt()
		if !now.Before(end) {
			continue
		}
		ok := true
		for k, v := range filter {
			if sb.metadata[k] != v {
				ok = false
			}
		}
		if ok {
			out = append(out, sb.listed(end))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StartedAt.After(out[j].StartedAt) })
	return out
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	sb, ok := s.lookup(r.PathValue("sandboxID"))
	if !ok {
		apiError(w, http.StatusNotFound, fmt.Sprintf("sandbox \"%s\" doesn't exist or you don't have access to it", r.PathValue("sandboxID")))
		return
	}
	writeJSON(w, http.StatusOK, sb.listed(sb.endAt()))
}

func (s *Server) kill(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("sandboxID")
	sb, ok := s.remove(id, "killed")
	if !ok {
		apiError(w, http.StatusNotFound, fmt.Sprintf("sandbox \"%s\" doesn't exist or you don't have access to it", id))
		return
	}
	// The sandbox is gone for every call from here on (removed above); its
	// local teardown finishes in the background, as E2B answers a kill
	// without waiting for the VM to be reclaimed. Close waits for it.
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := sb.end("killed"); err != nil {
			s.updateRecord(id, func(r *Record) { r.Ended = "killed; local teardown failed: " + err.Error() })
		}
	}()
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) setTimeout(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Timeout *json.Number `json:"timeout"`
	}
	if err := decodeStrict(r, &req); err != nil {
		apiError(w, http.StatusBadRequest, err.Error())
		return
	}
	if req.Timeout == nil {
		apiError(w, http.StatusBadRequest, "request body has an error: timeout is required")
		return
	}
	secs, err := int32Seconds(*req.Timeout)
	if err != nil {
		apiError(w, http.StatusBadRequest, err.Error())
		return
	}
	d := time.Duration(secs) * time.Second
	if d > s.cfg.MaxTimeout {
		apiError(w, http.StatusBadRequest, fmt.Sprintf("Timeout cannot be greater than %d hours", int(s.cfg.MaxTimeout.Hours())))
		return
	}
	id := r.PathValue("sandboxID")
	sb, ok := s.lookup(id)
	if !ok {
		apiError(w, http.StatusNotFound, fmt.Sprintf("sandbox \"%s\" doesn't exist or you don't have access to it", id))
		return
	}
	sb.setEnd(time.Now().Add(d))
	s.updateRecord(id, func(rec *Record) { rec.Timeout = d })
	w.WriteHeader(http.StatusNoContent)
}

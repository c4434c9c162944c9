package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docker0Gateway is the host's address on the default Docker bridge, when
// the host has one.
func docker0Gateway(t *testing.T) string {
	ifc, err := net.InterfaceByName("docker0")
	if err != nil {
		return ""
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}

// sandboxio egress report keeps out of its paste-ready lists what reaches a
// metadata service, this host, its Docker bridge or private networks, and
// says why after the lists; public entries stay in.
func TestEgressReportCLI_HoldsBackWhatIsNotTheInternet(t *testing.T) {
	gw := docker0Gateway(t)
	dest := `{"kind":"dns","name":"metadata.google.internal","count":2},` +
		`{"kind":"tcp","address":"169.254.169.254","port":80,"count":2},` +
		`{"kind":"tcp","address":"10.1.2.3","port":5432,"count":1},` +
		`{"kind":"dns","name":"1.2.1.10.in-addr.arpa","count":1},` +
		`{"kind":"dns","name":"pypi.org","count":1},` +
		`{"kind":"tcp","address":"151.101.0.223","port":443,"count":1}`
	if gw != "" {
		dest += `,{"kind":"tcp","address":"` + gw + `","port":2375,"count":1}`
	}
	log := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(log, []byte(`{"event":"exec","sandbox_id":"s","blocked_egress":9,"blocked_egress_destinations":[`+dest+"]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cli(t, "", "egress", "report", log)
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	t.Log(out)
	for _, list := range strings.Split(out, "allow = [")[1:] {
		body, _, _ := strings.Cut(list, "]")
		for _, bad := range []string{"metadata", "169.254", "10.1.2.3", "arpa", gw} {
			if bad != "" && strings.Contains(body, bad) {
				t.Errorf("a paste-ready list holds %q:\n%s", bad, body)
			}
		}
	}
	want := []string{
		"  \"pypi.org\", # DNS name\n", "  \"151.101.0.223/32\",\n",
		"#   WARNING metadata.google.internal (dns): cloud metadata endpoint",
		"#   WARNING 169.254.169.254 (tcp): cloud metadata endpoint",
		"#   WARNING 10.1.2.3 (tcp): private network (RFC 1918)",
		"#   WARNING 1.2.1.10.in-addr.arpa (dns): reverse-DNS name (the name of 10.1.2.1)",
	}
	if gw != "" {
		want = append(want, "#   WARNING "+gw+" (tcp): the Docker bridge (docker0, ")
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("want %q in the report", w)
		}
	}
}

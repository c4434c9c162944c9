package egressreport

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
)

// sampleLog is two Docker sandboxes (each record carries its counts so
// far), one sandbox on a backend that does not report, a refusal with no
// sandbox, and a line that is no record.
const sampleLog = `{"event":"created","sandbox_id":"a","blocked_egress":0}
{"event":"exec","sandbox_id":"a","blocked_egress":5,"blocked_egress_destinations":[{"kind":"dns","name":"pypi.org","count":4},{"kind":"tcp","address":"1.1.1.1","port":443,"count":1}]}
{"event":"killed","sandbox_id":"a","blocked_egress":7,"blocked_egress_destinations":[{"kind":"dns","name":"pypi.org","count":4},{"kind":"tcp","address":"1.1.1.1","port":443,"count":1},{"kind":"dns","name":"a\\034b\\036\\123x","count":1},{"kind":"udp","address":"2606:4700:4700::1111","port":123,"count":1}]}
{"event":"exec","sandbox_id":"b","blocked_egress":4,"blocked_egress_destinations":[{"kind":"dns","name":"pypi.org","count":2},{"kind":"dns","name":"files.pythonhosted.org","count":1},{"kind":"tcp","address":"162.159.140.245","port":443,"count":1},{"kind":"tls","name":"api.openai.com","address":"162.159.140.245","port":443,"count":1}]}
{"event":"exec","sandbox_id":"c","blocked_egress":null}
{"event":"refused","sandbox_id":null,"blocked_egress":null}
not json
`

func TestReadAddsUpTheLastRecordOfEachSandbox(t *testing.T) {
	rep, err := Read(strings.NewReader(sampleLog))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Attempts != 11 || rep.Sandboxes != 2 || rep.NotReporting != 1 || rep.Skipped != 1 || rep.Unlisted != 0 {
		t.Fatalf("report %+v", rep)
	}
	if d := rep.Destinations[0]; d.Name != "pypi.org" || d.Count != 6 {
		t.Fatalf("first destination %+v, want pypi.org with 6", d)
	}
	a := rep.Allow()
	if strings.Join(a.Domains, " ") != "pypi.org files.pythonhosted.org api.openai.com" || strings.Join(a.Addresses, " ") != "1.1.1.1 162.159.140.245 2606:4700:4700::1111" ||
		len(a.Left) != 1 {
		t.Fatalf("allow lists %+v", a)
	}
}

func TestWriteIsPasteReady(t *testing.T) {
	rep, _ := Read(strings.NewReader(sampleLog))
	var out bytes.Buffer
	rep.Write(&out, "audit.jsonl")
	s := out.String()
	t.Log(s)
	for _, want := range []string{
		"11 attempts from 2 sandboxes (1 more sandboxes on backends that do not report",
		"         6  dns   pypi.org\n",
		"         1  tcp   1.1.1.1:443\n",
		"  \"pypi.org\", # DNS name\n",
		"         1  tls   api.openai.com at 162.159.140.245:443\n",
		"  \"api.openai.com\", # DNS name\n",
		"  \"1.1.1.1/32\",\n",
		"  \"2606:4700:4700::1111/128\",\n",
		"Modal takes no DNS names: pypi.org, files.pythonhosted.org",
		`left out: a\034b\036\123x`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("want %q in the report", want)
		}
	}
	// The escaped name goes into no list: nothing of it between "allow = [" and "]".
	for _, list := range strings.Split(s, "allow = [")[1:] {
		if body, _, _ := strings.Cut(list, "]"); strings.Contains(body, `\`) || strings.Contains(body, "${") {
			t.Errorf("an allow list holds an escaped name: %q", body)
		}
	}
}

// FuzzRead: any log, no panic; every allow-list entry is a domain or a
// canonical address.
func FuzzRead(f *testing.F) {
	f.Add([]byte(sampleLog))
	f.Add([]byte(heldLog))
	f.Add([]byte(`{"sandbox_id":"x","blocked_egress":-5,"blocked_egress_destinations":[{"kind":"tcp","address":"::ffff:1.2.3.4","port":70000,"count":-1}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rep, err := Read(bytes.NewReader(b))
		if err != nil {
			return
		}
		rep.HostNetworks = hostNets
		a := rep.Allow()
		for _, d := range a.Domains {
			if !Domain(d) || ClassifyName(d).Held() {
				t.Fatalf("domain entry %q", d)
			}
		}
		for _, ip := range a.Addresses {
			addr, err := netip.ParseAddr(ip)
			if strings.ContainsAny(ip, "\"\\${}% \n") || err != nil || addr.String() != ip || ClassifyAddr(addr, hostNets, nil).Held() {
				t.Fatalf("address entry %q", ip)
			}
		}
		rep.Write(&bytes.Buffer{}, "fuzz")
	})
}

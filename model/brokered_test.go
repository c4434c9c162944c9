package model

import (
	"strings"
	"testing"
)

// Brokered secrets are part of the canonical form and the digest, in one
// normal form (hosts sorted without repeats, the default format filled
// in); a spec without any renders as before, so existing digests hold.
func TestSpecBrokeredCanonical(t *testing.T) {
	s := testSpec()
	plain, sum, err := s.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	s.BrokeredSecrets = map[string]BrokeredSecret{}
	if empty, esum, _ := s.Canonical(); esum != sum || strings.Contains(string(empty), "brokered") {
		t.Fatalf("an empty map changed the spec: %s", empty)
	}
	if strings.Contains(string(plain), "brokered") {
		t.Fatalf("a spec without brokered secrets renders them: %s", plain)
	}
	s.BrokeredSecrets = map[string]BrokeredSecret{
		"OPENAI_API_KEY": {Hosts: []string{"b.example.com", "a.example.com", "b.example.com"}, Header: "Authorization"},
	}
	b, bsum, err := s.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	want := `"secret_names":["TOKEN"],"brokered_secrets":{"OPENAI_API_KEY":{"hosts":["a.example.com","b.example.com"],"header":"Authorization","format":"%s"}},"labels"`
	if bsum == sum || !strings.Contains(string(b), want) {
		t.Fatalf("brokered secrets not canonical:\n%s\nwant it to hold\n%s", b, want)
	}
	if got := s.BrokeredSecrets["OPENAI_API_KEY"]; got.Format != "" || got.Hosts[0] != "b.example.com" {
		t.Fatalf("Canonical changed its receiver's map: %+v", got)
	}
	back, err := ParseSpec(b)
	if err != nil {
		t.Fatal(err)
	}
	if b2, sum2, _ := back.Canonical(); sum2 != bsum {
		t.Fatalf("round trip changed the spec:\n%s\n%s", b, b2)
	}
	if got := back.BrokeredNames(); len(got) != 1 || got[0] != "OPENAI_API_KEY" {
		t.Fatalf("BrokeredNames = %v", got)
	}
	s.BrokeredSecrets["OPENAI_API_KEY"] = BrokeredSecret{Hosts: []string{"a.example.com"}, Header: "Authorization", Format: "Bearer %s"}
	if _, sum3, _ := s.Canonical(); sum3 == bsum {
		t.Fatal("a changed format kept the digest")
	}
	tenant := s.ForTenant("acme", "s1", nil)
	tenant.BrokeredSecrets["OPENAI_API_KEY"].Hosts[0] = "changed.example"
	if s.BrokeredSecrets["OPENAI_API_KEY"].Hosts[0] != "a.example.com" {
		t.Fatal("ForTenant shares the brokered secrets with the template spec")
	}
}

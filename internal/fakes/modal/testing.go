package modalserver

import (
	"os"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/fakes/fakeserver"
)

// Test credentials. They are no real Modal tokens; tests that check that
// credentials never leak use them as canaries.
const (
	TestTokenID     = "ak-canaryTOKENid7f3e9c"
	TestTokenSecret = "as-canarySECRET-91b2d7e4a6c8"
	TestApp         = "sandboxio-test"
	TestEnvironment = "staging"
	// Image is the local test image every sandbox of the tests runs.
	Image = docker.LocalImage
)

var probe = fakeserver.Probe{Prepare: fakeserver.LocalImage}

// StartForTest starts a server with the test credentials, app and
// environment, for one test. Without a usable Docker daemon the test is
// skipped, or fails when SANDBOXIO_REQUIRE_DOCKER=1. Cleanup closes the
// server, which removes every sandbox it opened.
func StartForTest(t testing.TB) *Server {
	t.Helper()
	return StartForTestWith(t, TestTokenID, TestTokenSecret)
}

// StartForTestWith is StartForTest with a credential of the test's own (a
// canary made for one run).
func StartForTestWith(t testing.TB, tokenID, tokenSecret string) *Server {
	t.Helper()
	probe.Need(t)
	s, err := Start(Options{TokenID: tokenID, TokenSecret: tokenSecret, Apps: []string{TestApp},
		Environments: []string{TestEnvironment}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("modalserver close: %v", err)
		}
	})
	return s
}

// Env is the environment a Modal client needs to reach the server.
func (s *Server) Env() map[string]string {
	return map[string]string{"MODAL_SERVER_URL": s.URL(), "MODAL_TOKEN_ID": s.opts.TokenID, "MODAL_TOKEN_SECRET": s.opts.TokenSecret,
		"MODAL_CONFIG_PATH": os.DevNull}
}

// SetEnv points the process's Modal environment variables at the server
// for the test (t.Setenv: not for parallel tests).
func (s *Server) SetEnv(t *testing.T) {
	for k, v := range s.Env() {
		t.Setenv(k, v)
	}
}

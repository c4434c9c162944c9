package docker

import (
	"slices"
	"strings"
	"testing"
)

// The watcher outlives its owner and gets only what it needs to reach the
// same daemon and run: never the rest of a library user's environment,
// where secrets live.
func TestWatcherEnv_OnlyWhatTheWatcherNeeds(t *testing.T) {
	const canary = "CANARY-watcher-s3cr3t"
	environ := []string{
		"OPENAI_API_KEY=" + canary, "AWS_SECRET_ACCESS_KEY=" + canary, "DOCKER_AUTH=" + canary,
		childEnv + "=1", requireDockerEnv + "=1",
		reaperEnv + "=someone-else", // never inherited: the owner is named below
		"DOCKER_HOST=tcp://10.0.0.1:2376", "DOCKER_TLS_VERIFY=1", "DOCKER_CERT_PATH=/certs", "DOCKER_API_VERSION=1.41",
		"https_proxy=http://proxy:3128", "PATH=/usr/bin", "HOME=/home/u", "TMPDIR=/tmp/x",
		reaperGraceEnv + "=1s", reaperLogEnv + "=/tmp/reaper.log",
		"=C:=C:\\", "MALFORMED",
	}
	got := watcherEnv(environ, "owner-1")
	if s := strings.Join(got, "\n"); strings.Contains(s, canary) || strings.Contains(s, childEnv) ||
		strings.Contains(s, requireDockerEnv) || strings.Contains(s, "someone-else") || strings.Contains(s, "MALFORMED") {
		t.Fatalf("the watcher inherits too much:\n%s", s)
	}
	for _, want := range []string{
		"DOCKER_HOST=tcp://10.0.0.1:2376", "DOCKER_TLS_VERIFY=1", "DOCKER_CERT_PATH=/certs", "DOCKER_API_VERSION=1.41",
		"https_proxy=http://proxy:3128", "PATH=/usr/bin", "HOME=/home/u", "TMPDIR=/tmp/x",
		reaperGraceEnv + "=1s", reaperLogEnv + "=/tmp/reaper.log", reaperEnv + "=owner-1",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("missing %s in %v", want, got)
		}
	}
	if n := len(got); got[n-1] != reaperEnv+"=owner-1" {
		t.Fatalf("reaperEnv must be last and name the owner: %v", got)
	}
}

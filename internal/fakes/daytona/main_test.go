package daytonaserver

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker"
)

func TestMain(m *testing.M) {
	if os.Getenv(docker.ScopeEnv) == "" {
		_ = os.Setenv(docker.ScopeEnv, fmt.Sprintf("daytonaserver-test-%d", os.Getpid()))
	}
	os.Exit(m.Run())
}

// needReferee skips (or, with SANDBOXIO_REQUIRE_DOCKER=1, as in CI, fails)
// when node or the pinned SDK is missing.
func needReferee(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs("referee")
	if err != nil {
		t.Fatal(err)
	}
	_, nodeErr := exec.LookPath("node")
	_, sdkErr := os.Stat(filepath.Join(dir, "node_modules", "@daytonaio", "sdk", "package.json"))
	if nodeErr != nil || sdkErr != nil {
		msg := fmt.Sprintf("the referee needs node and Daytona's SDK installed by `make referee-deps` (node: %v, sdk: %v)", nodeErr, sdkErr)
		if os.Getenv(requireDockerEnv) == "1" {
			t.Fatal(msg)
		}
		t.Skip("SKIP: " + msg)
	}
	return dir
}

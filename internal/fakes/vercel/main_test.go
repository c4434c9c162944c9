package vercelserver

import (
	"testing"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/fakes/fakeserver"
)

func TestMain(m *testing.M) { fakeserver.Main(m, "vercelserver") }

// needReferee skips (or, with SANDBOXIO_REQUIRE_DOCKER=1, as in CI, fails)
// when node or the pinned SDK is missing.
func needReferee(t testing.TB) string {
	t.Helper()
	return fakeserver.NeedReferee(t, "Vercel", "@vercel/sandbox")
}

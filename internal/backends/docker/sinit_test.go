package docker

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The init's command line says what the backend planned, and parses back.
func TestInitCommandRoundTrip(t *testing.T) {
	created := time.Unix(1_800_000_000, 123456789)
	cold := createPlan{lifetime: 300 * time.Second, expires: created.Add(300 * time.Second)}
	cmd := initCommand(cold)
	if cmd[0] != initTarget || cmd[1] != initProto {
		t.Fatalf("command %q", cmd)
	}
	a, err := parseInitArgs(cmd[2:])
	if err != nil || a.warm || a.lifetime != cold.lifetime || !a.wall.Equal(created.Add(cold.lifetime)) {
		t.Fatalf("cold: %+v, %v", a, err)
	}
	warm := createPlan{lifetime: 20 * time.Second, warmIdle: 10 * time.Second, expires: created.Add(30 * time.Second), idleUntil: created.Add(10 * time.Second)}
	cmd = initCommand(warm)
	a, err = parseInitArgs(cmd[2:])
	if err != nil || !a.warm || a.idle != warm.warmIdle || a.lifetime != warm.lifetime ||
		!a.idleWall.Equal(created.Add(10*time.Second)) || !a.wall.Equal(created.Add(30*time.Second)) {
		t.Fatalf("warm: %+v, %v", a, err)
	}
}

func TestParseInitArgsRefuses(t *testing.T) {
	for _, args := range [][]string{
		nil, {"cold"}, {"cold", "1"}, {"cold", "1", "2", "3"}, {"cold", "0", "5"}, {"cold", "-1", "5"}, {"cold", "x", "5"},
		{"cold", "1", "99999999999999999999"}, {"warm", "1", "2", "3"}, {"hot", "1", "2"}, {"warm", "1", "2", "3", "0"},
	} {
		if a, err := parseInitArgs(args); err == nil {
			t.Errorf("%q parsed: %+v", args, a)
		}
	}
}

func FuzzParseInitArgs(f *testing.F) {
	f.Add("cold 300000000000 1800000000000000000")
	f.Add("warm 1 2 3 4")
	f.Fuzz(func(t *testing.T, s string) {
		a, err := parseInitArgs(strings.Fields(s))
		if err == nil && (a.lifetime <= 0 || a.wall.IsZero() || a.warm && (a.idle <= 0 || a.idleWall.IsZero())) {
			t.Fatalf("%q parsed to %+v", s, a)
		}
	})
}

// Only a static ELF executable for the daemon's architecture is taken as
// the init: the refusal is a ConfigurationError that says how to fix it.
func TestCheckInitELF(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := checkInitELF(exe, "x86_64"); err != nil {
		t.Logf("this test binary is not an init (%v); run the tests with CGO_ENABLED=0, as make does", err)
	}
	notELF := t.TempDir() + "/script"
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, arch, want string }{
		{"/bin/ls", "x86_64", "dynamically linked"}, // Debian's coreutils
		{notELF, "x86_64", "not a Linux ELF executable"},
		{exe, "aarch64", "is built for"},
		{exe, "pdp11", "architecture"},
	} {
		err := checkInitELF(tc.path, tc.arch)
		var me *model.Error
		if !errors.As(err, &me) || me.Class != model.ErrConfiguration || me.Attribute != "backend" ||
			!strings.Contains(me.Message, tc.want) || !strings.Contains(me.Fix, InitEnv) {
			t.Errorf("%s on %s: got %v, want a ConfigurationError saying %q", tc.path, tc.arch, err, tc.want)
		}
	}
}

// A dynamic init is refused before anything is created.
func TestCreateRefusesDynamicInit(t *testing.T) {
	needDocker(t)
	b := newTestBackend(t)
	t.Setenv(InitEnv, "/bin/ls")
	spec := testSpec(t)
	_, err := b.Create(t.Context(), backends.CreateRequest{Spec: spec})
	me := classError(t, err, model.ErrConfiguration, "")
	if !strings.Contains(me.Message, "dynamically linked") {
		t.Fatalf("got %v", err)
	}
	if cs, err := b.List(t.Context(), map[string]string{"test": spec.Labels["test"]}); err != nil || len(cs) != 0 {
		t.Fatalf("a refused create left %d containers (%v)", len(cs), err)
	}
	t.Setenv(InitEnv, "relative/path")
	_, err = b.Create(t.Context(), backends.CreateRequest{Spec: testSpec(t)})
	if me := classError(t, err, model.ErrConfiguration, ""); !strings.Contains(me.Message, "absolute") {
		t.Fatalf("got %v", err)
	}
}

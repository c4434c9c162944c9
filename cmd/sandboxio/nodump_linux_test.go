//go:build linux

package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
)

// nobody is the uid the processes under test run as when the test runs as
// root: root owns every /proc file of a non-dumpable process, so the
// observation needs a process of another uid (a root test process would see
// root-owned files either way).
const nobody = 65534

// publicDir is a directory every uid can read and search, for the binary and
// its inputs when they run as nobody (t.TempDir is the test user's only).
func publicDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sandboxio-nodump-") //nolint:usetesting // nobody must reach it; t.TempDir's parent is mode 0700
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func buildCLI(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "sandboxio")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// asOther runs cmd as nobody when the test is root; otherwise as the test's
// own uid, which is then not root, and which a non-dumpable process's /proc
// files do not belong to either.
func asOther(cmd *exec.Cmd) {
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	}
}

// procFacts reads what /proc says of pid: its RLIMIT_CORE ("soft hard" from
// limits), its real uid, and the owner of its environ file.
func procFacts(t *testing.T, pid int) (core string, uid, environOwner int) {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/limits")
	if err != nil {
		return "", -1, -1
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Max core file size"); ok {
			f := strings.Fields(rest)
			if len(f) >= 2 {
				core = f[0] + " " + f[1]
			}
		}
	}
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return core, -1, -1
	}
	for _, l := range strings.Split(string(st), "\n") {
		if rest, ok := strings.CutPrefix(l, "Uid:"); ok {
			uid, _ = strconv.Atoi(strings.Fields(rest)[0])
		}
	}
	var fi syscall.Stat_t
	if err := syscall.Stat("/proc/"+strconv.Itoa(pid)+"/environ", &fi); err != nil {
		return core, uid, -1
	}
	return core, uid, int(fi.Uid)
}

// wantProtected waits (up to 10 s) for the process to have applied its
// protection, then checks it: no core dumps (RLIMIT_CORE 0 0) and not
// dumpable (its /proc files belong to root, not to the uid it runs as).
func wantProtected(t *testing.T, what string, pid int) {
	t.Helper()
	var core string
	var uid, owner int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		core, uid, owner = procFacts(t, pid)
		if (core == "0 0" && owner == 0) || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("%s (pid %d, uid %d): Max core file size %q, /proc/%d/environ owned by uid %d", what, pid, uid, core, pid, owner)
	if uid == 0 || uid < 0 {
		t.Fatalf("%s runs as uid %d: the observation needs another uid than root", what, uid)
	}
	if core != "0 0" {
		t.Errorf("%s: Max core file size %q, want 0 0", what, core)
	}
	if owner != 0 {
		t.Errorf("%s is dumpable: /proc/%d/environ belongs to uid %d, its own, not to root", what, pid, owner)
	}
}

// The CLI and the Docker watcher, the processes that hold secret values,
// write no core dump and are not dumpable, from their first moments on: the
// real binary, started as another uid than root, shows RLIMIT_CORE 0 and
// root-owned /proc files. A control process of the same uid (sleep) shows
// its own uid, so the observation tells the two apart. And a non-dumpable
// CLI still re-executes itself through /proc/self/exe to take secrets out
// of its environment.
func TestCLIAndWatcherAreNotDumpable(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI")
	}
	dir := publicDir(t)
	bin := buildCLI(t, dir)

	control := exec.Command("sleep", "30")
	asOther(control)
	if err := control.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = control.Process.Kill(); _ = control.Wait() }()
	if _, uid, owner := procFacts(t, control.Process.Pid); owner != uid {
		t.Fatalf("control: /proc environ owned by %d, process uid %d: this kernel does not show dumpability this way", owner, uid)
	}

	t.Run("cli", func(t *testing.T) {
		// egress report - waits for its standard input: a CLI that runs main.
		cmd := exec.Command(bin, "egress", "report", "-")
		asOther(cmd)
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wantProtected(t, "sandboxio egress report", cmd.Process.Pid)
		_ = in.Close()
		if err := cmd.Wait(); err != nil || !strings.Contains(out.String(), "Nothing was attempted") {
			t.Fatalf("the protected CLI did not work: %v\n%s", err, out.String())
		}
	})

	t.Run("watcher", func(t *testing.T) {
		// The watcher is the same binary started with the owner's pipe on
		// fd 3; with the pipe open it waits for its owner.
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin)
		cmd.Env = []string{"SANDBOXIO_DOCKER_REAPER=nodump-test-owner", "SANDBOXIO_DOCKER_REAPER_GRACE=0s", "DOCKER_HOST=unix:///nonexistent/docker.sock"}
		cmd.ExtraFiles = []*os.File{r}
		asOther(cmd)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		_ = r.Close()
		wantProtected(t, "the watcher", cmd.Process.Pid)
		_ = w.Close() // the owner is gone: it sweeps (a daemon that is not there) and exits
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			t.Logf("the watcher exited: %v", err)
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatal("the watcher did not exit after its owner")
		}
	})

	t.Run("re-exec", func(t *testing.T) {
		// A secret in the environment: run re-executes itself through
		// /proc/self/exe without it before anything else. The daemon is
		// not reached (none at that address), which is the exit code
		// after a re-execution that worked.
		spec, _ := specFile(t, "acme", "nodump", func(x *inputs.Template) { x.SecretNames = []string{"SANDBOXIO_NODUMP_SECRET"} })
		data, err := os.ReadFile(spec)
		if err != nil {
			t.Fatal(err)
		}
		pub := filepath.Join(dir, "spec.json")
		if err := os.WriteFile(pub, data, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "run", "--spec", pub, "--tenant", "acme", "--session", "nodump", "--", "true")
		cmd.Env = []string{"SANDBOXIO_NODUMP_SECRET=s3cr3t-value", "DOCKER_HOST=unix:///nonexistent/docker.sock", "HOME=" + dir}
		asOther(cmd)
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = io.Discard, &stderr
		err = cmd.Run()
		t.Logf("run: %v\n%s", err, stderr.String())
		if strings.Contains(stderr.String(), "could not re-execute") {
			t.Fatalf("a non-dumpable CLI could not re-execute itself: %s", stderr.String())
		}
		if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != exitBackend {
			t.Fatalf("run: %v, want exit %d (no daemon there)", err, exitBackend)
		}
	})
}

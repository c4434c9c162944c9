package docker

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// runProbe runs probeScript with the host's shell against a process table
// rooted at root, and returns its report.
func runProbe(t *testing.T, sid, mode, root string) probeResult {
	t.Helper()
	out, err := exec.Command("/bin/sh", "-c", probeScript, "sandboxio-probe", sid, mode, root).CombinedOutput()
	if err != nil {
		t.Fatalf("probe: %v: %s", err, out)
	}
	pr, ok := parseProbe(out)
	if !ok {
		t.Fatalf("probe report not read: %q", out)
	}
	return pr
}

// counts is what a probe found in the process table (the cgroup counters
// depend on the host running the test).
func counts(pr probeResult) [3]int { return [3]int{pr.left, pr.procs, pr.peak} }

var unknown = [3]int{-1, -1, -1}

func fakeProc(t *testing.T, procs map[int]string) string {
	t.Helper()
	root := t.TempDir()
	for pid, stat := range procs {
		dir := filepath.Join(root, strconv.Itoa(pid))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// A scan that sees no live process has failed (the probe is one): its
// counts are unknown, never zero, so a failed listing cannot pass for "the
// session's processes are gone". CI saw exactly that under gVisor with a
// fork bomb running: every count 0, and a timeout reported instead of the
// process ceiling.
func TestProbe_EmptyProcessTableIsUnknownNotZero(t *testing.T) {
	empty := t.TempDir()
	for _, mode := range []string{"", "kill"} {
		if got := counts(runProbe(t, "4242", mode, empty)); got != unknown {
			t.Errorf("mode %q: %+v, want every count -1", mode, got)
		}
	}
	// Only zombies: nothing live was seen either.
	zombies := fakeProc(t, map[int]string{7: "7 (sh) Z 1 7 7 0"})
	if got := counts(runProbe(t, "7", "", zombies)); got != unknown {
		t.Errorf("zombies only: %+v, want every count -1", got)
	}
}

func TestProbe_CountsTheSessionAndSkipsZombies(t *testing.T) {
	root := fakeProc(t, map[int]string{
		1:  "1 (init) S 0 1 1 0",
		20: "20 (sh) S 1 20 20 0",      // the session leader
		21: "21 (a b) c) R 20 20 20 0", // a name with ") " in it
		22: "22 (sleep) S 21 22 20 0",  // own group, same session
		23: "23 (sleep) Z 21 20 20 0",  // a zombie of the session
		30: "30 (other) S 1 30 30 0",   // another session
	})
	got := runProbe(t, "20", "", root)
	if got.left != 3 || got.procs != 5 || got.peak != 5 {
		t.Fatalf("%+v, want left=3 procs=5 peak=5", got)
	}
}

// With "kill", the probe kills a real session on this host and reports
// none left from a scan that saw it gone.
func TestProbe_KillsTheSession(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc on this host")
	}
	cmd := exec.Command("/bin/sh", "-c", "sleep 300 & sleep 300 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	sid := strconv.Itoa(cmd.Process.Pid)

	// The two sleeps start in the background: wait for all three.
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := runProbe(t, sid, "", "/proc")
		if got.left == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session never showed three processes: %+v", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := runProbe(t, sid, "kill", "/proc"); got.left != 0 || got.peak < 4 {
		t.Fatalf("after kill: %+v, want left=0 from a scan that saw the session (peak >= 4)", got)
	}
	select {
	case err := <-waited:
		t.Logf("the session leader ended: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the session leader is still running")
	}
	if got := runProbe(t, sid, "", "/proc"); got.left != 0 {
		t.Fatalf("afterwards: %+v", got)
	}
}

// A daemon error that quotes the command line quotes the script, whose
// report format is in it: that must not read as a report (CI read one as
// zero processes, and a fork bomb as a plain timeout).
func TestParseProbe_RefusesTheScriptQuoted(t *testing.T) {
	daemonError := "OCI runtime exec failed: exec failed: unable to start container process: [/bin/sh -c " + probeScript + " sandboxio-probe 68 kill]: resource temporarily unavailable"
	if pr, ok := parseProbe([]byte(daemonError)); ok {
		t.Fatalf("a quoted script read as a report: %+v", pr)
	}
	for _, bad := range []string{
		"\x1esandboxio-probe\x1e left=1 procs=2",                   // peak missing
		"\x1esandboxio-probe\x1e left=$left procs=2 peak=3",        // not a number
		"\x1esandboxio-probe\x1e left=1 procs=2 peak=3 extra=4",    // unknown field
		"\x1esandboxio-probe\x1e left=-2 procs=2 peak=3",           // below "unknown"
		"\x1esandboxio-probe\x1e left=1 procs=2 peak=3 pids_max=x", // not a number
	} {
		if pr, ok := parseProbe([]byte(bad)); ok {
			t.Errorf("%q read as %+v", bad, pr)
		}
	}
	pr, ok := parseProbe([]byte("noise\x1esandboxio-probe\x1e left=1 procs=2 peak=3 pids_max= oom_kill=4\ntrailing"))
	if want := (probeResult{left: 1, procs: 2, peak: 3, pidsMax: -1, oomKil: 4}); !ok || pr != want {
		t.Fatalf("got %+v %v, want %+v", pr, ok, want)
	}
}

func FuzzParseProbe(f *testing.F) {
	f.Add([]byte("\x1esandboxio-probe\x1e left=1 procs=2 peak=3 pids_max= oom_kill=\n"))
	f.Add([]byte(probeScript))
	f.Fuzz(func(t *testing.T, b []byte) {
		pr, ok := parseProbe(b)
		if ok && (pr.left < -1 || pr.procs < -1 || pr.peak < -1 || pr.pidsMax < -1 || pr.oomKil < -1) {
			t.Fatalf("accepted %+v", pr)
		}
	})
}

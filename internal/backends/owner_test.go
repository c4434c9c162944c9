package backends

import (
	"encoding/json"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ownerHelperEnv turns the test binary into a helper that prints its own
// owner record (and whether its /proc is its own) as JSON, then waits for
// its standard input to close.
const ownerHelperEnv = "SANDBOXIO_TEST_OWNER_HELPER"

func TestOwnerHelperProcess(t *testing.T) {
	if os.Getenv(ownerHelperEnv) != "1" {
		return
	}
	o := ProcessOwner()
	rec := o.Labels()
	rec["procOwn"] = strconv.FormatBool(o.procOwn)
	_ = json.NewEncoder(os.Stdout).Encode(rec)
	buf := make([]byte, 1)
	_, _ = os.Stdin.Read(buf)
	os.Exit(0)
}

// startOwnerHelper runs the helper under wrapper (unshare ...) and returns
// its record; the helper ends when the test does, or when stop is called.
func startOwnerHelper(t *testing.T, wrapper ...string) (rec map[string]string, stop func()) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	argv := append(append(wrapper, exe), "-test.run=^TestOwnerHelperProcess$")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), ownerHelperEnv+"=1")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop = func() { _ = in.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() }
	t.Cleanup(stop)
	done := make(chan error, 1)
	go func() { done <- json.NewDecoder(out).Decode(&rec) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("helper: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("helper did not answer within 60s")
	}
	return rec, stop
}

func needUnsharePID(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("unshare --pid needs Linux and root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare")
	}
}

func TestProcessOwnerRecordsItsNamespace(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only")
	}
	o := ProcessOwner()
	if o.ID == "" || o.PID != os.Getpid() || o.Boot == "" || o.Start == "" || o.PIDNS == "" || o.BootTime == "" || !o.procOwn {
		t.Fatalf("incomplete owner: %+v", o)
	}
	if ino, _ := os.Readlink("/proc/self/ns/pid"); !strings.HasSuffix(o.PIDNS, ":"+strings.TrimSuffix(strings.TrimPrefix(ino, "pid:["), "]")) {
		t.Fatalf("PID namespace %q, /proc/self/ns/pid is %q", o.PIDNS, ino)
	}
}

// The judgement on records of this very namespace: a live owner, a gone
// one, a reused pid; and on records it cannot verify, which all count as
// alive.
func TestOwnerJudge(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only")
	}
	self := ProcessOwner()
	exited := exec.Command("true")
	if err := exited.Run(); err != nil {
		t.Fatal(err)
	}
	with := func(changes ...string) map[string]string {
		rec := self.Labels()
		rec[LabelOwner] = "someone-else"
		for i := 0; i+1 < len(changes); i += 2 {
			if changes[i+1] == "<unset>" {
				delete(rec, changes[i])
			} else {
				rec[changes[i]] = changes[i+1]
			}
		}
		return rec
	}
	earlier := func(d int64) string {
		n, _ := strconv.ParseInt(self.BootTime, 10, 64)
		return strconv.FormatInt(n-d, 10)
	}
	dead := []struct {
		name string
		rec  map[string]string
	}{
		{"no such pid, same namespace", with(LabelOwnerPID, strconv.Itoa(exited.ProcessState.Pid()))},
		{"pid of another process now (start time)", with(LabelOwnerStart, "1")},
		{"an earlier boot of this machine", with(LabelOwnerBoot, "another-boot", LabelOwnerBootTime, earlier(3600))},
	}
	for _, c := range dead {
		if v := self.Judge(c.rec); !v.Dead || v.Why == "" {
			t.Errorf("%s: %+v, want dead", c.name, v)
		}
	}
	alive := []struct {
		name string
		rec  map[string]string
	}{
		{"a live process of this namespace", with()},
		{"this process", self.Labels()},
		{"another PID namespace", with(LabelOwnerPIDNS, "4:4026532999", LabelOwnerPID, "1", LabelOwnerStart, "12")},
		{"another PID namespace, pid absent here", with(LabelOwnerPIDNS, "4:4026532999", LabelOwnerPID, "999999999")},
		{"another time namespace", with(LabelOwnerTimeNS, "4:4026532998", LabelOwnerStart, "1")},
		{"no PID namespace (an older record)", with(LabelOwnerPIDNS, "<unset>", LabelOwnerPID, "999999999")},
		{"no owner id", with(LabelOwner, "<unset>", LabelOwnerPID, "999999999")},
		{"no pid", with(LabelOwnerPID, "<unset>")},
		{"unparsable pid", with(LabelOwnerPID, "12x")},
		{"negative pid", with(LabelOwnerPID, "-1")},
		{"no boot id", with(LabelOwnerBoot, "<unset>", LabelOwnerPID, "999999999")},
		{"no start time", with(LabelOwnerStart, "<unset>", LabelOwnerPID, "999999999")},
		{"another boot, another machine", with(LabelOwnerBoot, "b", LabelOwnerMachine, "another", LabelOwnerBootTime, earlier(3600))},
		{"another boot, no machine digest", with(LabelOwnerBoot, "b", LabelOwnerMachine, "<unset>", LabelOwnerBootTime, earlier(3600))},
		{"another boot, another hostname", with(LabelOwnerBoot, "b", LabelOwnerHost, "elsewhere", LabelOwnerBootTime, earlier(3600))},
		{"another boot that began after this one (another kernel)", with(LabelOwnerBoot, "b", LabelOwnerBootTime, earlier(-60))},
		{"another boot, no boot time", with(LabelOwnerBoot, "b", LabelOwnerBootTime, "<unset>")},
		{"no labels", map[string]string{}},
	}
	for _, c := range alive {
		if v := self.Judge(c.rec); v.Dead || v.Why == "" {
			t.Errorf("%s: %+v, want alive", c.name, v)
		}
	}
	// A judge whose /proc is not its own namespace's cannot look anything up.
	blind := self
	blind.procOwn = false
	if v := blind.Judge(with(LabelOwnerPID, strconv.Itoa(exited.ProcessState.Pid()))); v.Dead {
		t.Errorf("a judge with another namespace's /proc: %+v, want alive", v)
	}
}

// An owner in another PID namespace (unshare --pid --fork --mount-proc, as
// a container or systemd's PrivatePIDs makes) records a pid that means
// nothing here (1, here the host's init): it counts as alive, whether it
// runs or has gone, and its record says why.
func TestOwnerInAnotherPIDNamespaceIsAlive(t *testing.T) {
	needUnsharePID(t)
	self := ProcessOwner()
	rec, stop := startOwnerHelper(t, "unshare", "--pid", "--fork", "--mount-proc", "--kill-child")
	if rec[LabelOwnerPID] != "1" || rec[LabelOwnerPIDNS] == "" || rec[LabelOwnerPIDNS] == self.PIDNS || rec[LabelOwnerBoot] != self.Boot || rec["procOwn"] != "true" {
		t.Fatalf("helper's record: %v (this process: %+v)", rec, self)
	}
	delete(rec, "procOwn")
	if v := self.Judge(rec); v.Dead || !strings.Contains(v.Why, "another PID namespace") {
		t.Fatalf("live owner in another PID namespace: %+v, want alive", v)
	}
	stop()
	if v := self.Judge(rec); v.Dead {
		t.Fatalf("gone owner in another PID namespace: %+v, want alive (not verifiable)", v)
	}
}

// A process in a PID namespace of its own whose /proc is still the parent
// namespace's (unshare --pid --fork without --mount-proc) knows that a pid
// looked up there would be another namespace's.
func TestOwnerWithAnotherNamespacesProcIsBlind(t *testing.T) {
	needUnsharePID(t)
	rec, _ := startOwnerHelper(t, "unshare", "--pid", "--fork", "--kill-child")
	if rec["procOwn"] != "false" || rec[LabelOwnerPID] != "1" || rec[LabelOwnerStart] == "" {
		t.Fatalf("helper's record: %v", rec)
	}
	// Its start time is its own, read through /proc/self, not the host's
	// pid 1's.
	if host := statStart("/proc/1/stat"); rec[LabelOwnerStart] == host {
		t.Fatalf("the helper recorded the start time of this namespace's pid 1 (%s)", host)
	}
}

// Describe names everything a person needs to find the owner.
func TestDescribeOwner(t *testing.T) {
	rec := ProcessOwner().Labels()
	d := Describe(rec)
	for _, want := range []string{rec[LabelOwner], "pid " + rec[LabelOwnerPID], rec[LabelOwnerHost], rec[LabelOwnerPIDNS]} {
		if !strings.Contains(d, want) {
			t.Errorf("%q does not name %q", d, want)
		}
	}
	if d := Describe(nil); !strings.Contains(d, "owner unknown") {
		t.Errorf("empty record: %q", d)
	}
}

// Whatever a record holds, the judgement does not panic, and an owner
// recorded in another PID namespace of this boot is never dead.
func FuzzOwnerJudge(f *testing.F) {
	self := ProcessOwner()
	f.Add("x", "1", self.Boot, "12", self.PIDNS, self.TimeNS, self.Machine, self.BootTime, self.Host)
	f.Add("x", "999999999", "b", "", "", "", "", "0", "")
	f.Fuzz(func(t *testing.T, id, pid, boot, start, pidns, timens, machine, btime, host string) {
		rec := map[string]string{LabelOwner: id, LabelOwnerPID: pid, LabelOwnerBoot: boot, LabelOwnerStart: start,
			LabelOwnerPIDNS: pidns, LabelOwnerTimeNS: timens, LabelOwnerMachine: machine, LabelOwnerBootTime: btime, LabelOwnerHost: host}
		v := self.Judge(rec)
		if v.Why == "" {
			t.Fatalf("no reason: %v", rec)
		}
		if v.Dead && boot == self.Boot && pidns != self.PIDNS {
			t.Fatalf("another PID namespace judged dead: %v", rec)
		}
	})
}

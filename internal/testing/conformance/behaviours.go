package backendtest

import (
	"bytes"
	"context"
	"crypto/md5"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// openLabels: a sandbox carries its tenant and session labels, in Info, in
// List (which finds it by them and by no other tenant's) and vendor-side.
func openLabels(t *testing.T, e *env) {
	o := e.open(t)
	info := o.sb.Info()
	if info.ID == "" || info.ID != o.sb.ID() {
		t.Fatalf("Info().ID %q, ID() %q: want the same, non-empty", info.ID, o.sb.ID())
	}
	want := map[string]string{model.LabelTenantID: o.spec.TenantID, model.LabelSessionID: o.spec.SessionID}
	maps.Copy(want, o.labels)
	wantLabels(t, "Info().Labels", info.Labels, want)

	byTenant := map[string]string{model.LabelTenantID: o.spec.TenantID, model.LabelSessionID: o.spec.SessionID}
	got := e.list(t, byTenant)
	if len(got) != 1 || got[0].ID != o.sb.ID() {
		t.Fatalf("List(%v) = %v, want exactly sandbox %s", byTenant, ids(got), o.sb.ID())
	}
	wantLabels(t, "List's labels", got[0].Labels, want)
	if !got[0].Running {
		t.Errorf("List reports the open sandbox %s not running", o.sb.ID())
	}
	if got := e.list(t, o.labels); len(got) != 1 || got[0].ID != o.sb.ID() {
		t.Fatalf("List(%v) = %v, want exactly sandbox %s", o.labels, ids(got), o.sb.ID())
	}
	other := map[string]string{model.LabelTenantID: "conf-other-" + e.runID, LabelCase: o.labels[LabelCase]}
	if got := e.list(t, other); len(got) != 0 {
		t.Fatalf("List(%v) with another tenant = %v, want none", other, ids(got))
	}
	if obs, ok := e.observe(t, o.sb.ID()); ok && obs.Labels != nil {
		wantLabels(t, "the vendor's labels", obs.Labels, want)
	} else {
		t.Logf("vendor-side labels not observed (Harness.Observe unset or reports no Labels)")
	}
}

func wantLabels(t *testing.T, where string, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s[%q] = %q, want %q (all: %v)", where, k, got[k], v, got)
		}
	}
}

func ids(infos []backends.Info) []string {
	out := make([]string, len(infos))
	for i, in := range infos {
		out[i] = in.ID
	}
	return out
}

// runStreams: Run returns the exit code, stdout and stderr apart, passes
// stdin and env, and streams to writers when asked.
func runStreams(t *testing.T, e *env) {
	o := e.open(t)
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	res, err := o.sb.Run(ctx, []string{"sh", "-c", `printf 'out-%s' "$CONF_X"; printf 'err-line' >&2; exit 3`},
		backends.RunOptions{Env: map[string]string{"CONF_X": "x1"}})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if res.ExitCode != 3 || string(res.Stdout) != "out-x1" || string(res.Stderr) != "err-line" {
		t.Fatalf("got exit %d stdout %q stderr %q; want exit 3, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr, "out-x1", "err-line")
	}

	in := []byte("line one\nbinary \x00\xff end")
	if _, textOnly := e.h.Skip[BinaryOutput]; textOnly {
		// The input must still arrive byte for byte: its digest shows it.
		res, err = o.sb.Run(ctx, []string{"md5sum"}, backends.RunOptions{Stdin: in})
		if want := fmt.Sprintf("%x", md5.Sum(in)); err != nil || !strings.HasPrefix(string(res.Stdout), want) {
			t.Fatalf("md5sum of stdin: %q, %v; want %s (the stdin passed byte for byte)", res.Stdout, err, want)
		}
	} else {
		res, err = o.sb.Run(ctx, []string{"cat"}, backends.RunOptions{Stdin: in})
		if err != nil {
			t.Fatalf("run cat: %v", err)
		}
		if res.ExitCode != 0 || !bytes.Equal(res.Stdout, in) || len(res.Stderr) != 0 {
			t.Fatalf("cat of stdin: exit %d stdout %q stderr %q, want exit 0 and stdout %q", res.ExitCode, res.Stdout, res.Stderr, in)
		}
	}

	var out, errb bytes.Buffer
	res, err = o.sb.Run(ctx, []string{"sh", "-c", "echo streamed; echo streamed-err >&2"}, backends.RunOptions{Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatalf("run streamed: %v", err)
	}
	if res.ExitCode != 0 || out.String() != "streamed\n" || errb.String() != "streamed-err\n" {
		t.Fatalf("streamed: exit %d, writers got %q and %q; want exit 0, %q and %q", res.ExitCode, out.String(), errb.String(), "streamed\n", "streamed-err\n")
	}
	if len(res.Stdout) != 0 || len(res.Stderr) != 0 {
		t.Fatalf("streamed output came back in Result too: %q %q", res.Stdout, res.Stderr)
	}
}

// runCode: RunCode runs a program in the harness's language.
func runCode(t *testing.T, e *env) {
	c := e.h.Code
	if c.Lang == "" {
		c = Code{Lang: "sh", Program: "x=6; echo $((x*7))\n", Want: "42"}
	}
	o := e.open(t)
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	res, err := o.sb.RunCode(ctx, c.Lang, c.Program, backends.RunOptions{})
	if err != nil {
		t.Fatalf("run code (%s): %v", c.Lang, err)
	}
	if res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != c.Want {
		t.Fatalf("run code (%s): exit %d stdout %q stderr %q; want exit 0 and %q", c.Lang, res.ExitCode, res.Stdout, res.Stderr, c.Want)
	}
}

// upload: a file uploaded (creating its directory) reads back byte for
// byte with its mode, and a second upload replaces it whole.
func upload(t *testing.T, e *env) {
	o := e.open(t)
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	content := bytes.Repeat([]byte("conformance \x00\x01\xfe\xff\n"), 8192) // 160 KiB, binary
	const p = "/tmp/conformance/sub dir/file.bin"
	if err := o.sb.Upload(ctx, p, content, 0o640); err != nil {
		t.Fatalf("upload: %v", err)
	}
	if _, textOnly := e.h.Skip[BinaryOutput]; textOnly {
		if got, want := sh(t, o.sb, `md5sum "$1"`, p), fmt.Sprintf("%x", md5.Sum(content)); !strings.HasPrefix(got, want) {
			t.Fatalf("read back: md5sum %q, want %s (the %d bytes uploaded)", got, want, len(content))
		}
	} else if res := run(t, o.sb, `cat "$1"`, p); res.ExitCode != 0 || !bytes.Equal(res.Stdout, content) {
		t.Fatalf("read back: exit %d, %d bytes (stderr %q), want the %d bytes uploaded", res.ExitCode, len(res.Stdout), res.Stderr, len(content))
	}
	if _, skip := e.h.Skip["upload-mode"]; !skip {
		if mode := sh(t, o.sb, `stat -c %a "$1"`, p); mode != "640" {
			t.Fatalf("uploaded file mode %s, want 640", mode)
		}
	}
	if err := o.sb.Upload(ctx, p, []byte("short"), 0o644); err != nil {
		t.Fatalf("second upload: %v", err)
	}
	if got := sh(t, o.sb, `cat "$1"`, p); got != "short" {
		t.Fatalf("after the second upload the file holds %q, want %q", got, "short")
	}
}

// countBody sets n to how many live processes other than the shell and PID 1
// (an init whose arguments may hold any digits) have a command line
// containing $1$1 (the marker doubled, so that its own arguments never
// match), with shell builtins only; countScript prints it.
const (
	countBody   = `m="$1$1"; n=0; for d in /proc/[0-9]*; do case $d in /proc/$$|/proc/1) continue;; esac; c=; read -r c 2>/dev/null <"$d/cmdline" || true; case "$c" in *"$m"*) n=$((n+1));; esac; done`
	countScript = countBody + `; echo $n`
)

// seenScript starts a marked background process and counts it, scanning
// until the child has exec'd (a forked child shows its parent's command
// line until then: under load a single scan came too early).
const seenScript = `sleep 4242 & i=0; while :; do ` + countBody + `; [ "$n" != 0 ] && break; i=$((i+1)); [ $i -ge 2000 ] && break; done; kill $!; echo $n`

// execTimeout: a command past its timeout ends in ExecutionTimeout within
// one second of it, with no partial output, and none of its processes
// (foreground or background) is left.
func execTimeout(t *testing.T, e *env) {
	o := e.open(t)
	// The counter sees a live marked process, so zero below means gone.
	if n := sh(t, o.sb, strings.ReplaceAll(seenScript, `"$1$1"`, `"42""42"`)); n == "0" {
		t.Fatalf("the process counter did not see a live background process")
	}
	limit := e.execTimeout()
	start := time.Now()
	res, err := o.sb.Run(t.Context(), []string{"sh", "-c", "echo partial; echo partial-err >&2; sleep 3131 & sleep 3132"},
		backends.RunOptions{Timeout: limit})
	took := time.Since(start)
	e.wantClass(t, err, model.ErrExecutionTimeout, "a command past its timeout")
	if took < limit-50*time.Millisecond || took > limit+time.Second {
		t.Errorf("ExecutionTimeout after %s, want within 1 s of the timeout %s", took.Round(time.Millisecond), limit)
	}
	if res.ExitCode != 0 || len(res.Stdout) != 0 || len(res.Stderr) != 0 {
		t.Errorf("a timed-out command returned a partial result: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	// A process SIGKILLed a moment ago may still be exiting: only one that
	// stays is a survivor. The count is taken until it is 0, for up to 1 s.
	cres, err := o.sb.Run(ctx, []string{"sh", "-c", `i=0; while :; do ` + countBody + `; [ "$n" = 0 ] && break; i=$((i+1)); [ $i -ge 20 ] && break; sleep 0.05; done; echo $n`, "count", "31"},
		backends.RunOptions{Timeout: 10 * time.Second})
	if classOf(err) == model.ErrSandboxGone {
		// Killing the whole sandbox also kills the command's processes;
		// accepted once the sandbox is shown gone.
		t.Logf("the backend killed the whole sandbox at the timeout: %v", err)
		e.waitNone(t, o.labels, "the sandbox killed at the timeout")
		return
	}
	if err != nil {
		t.Fatalf("count processes: %v", err)
	}
	if n := strings.TrimSpace(string(cres.Stdout)); n != "0" {
		t.Fatalf("%s of the timed-out command's processes are still running", n)
	}
}

// lifetime: the vendor ends the sandbox at its lifetime: a command running
// then ends in SandboxGone, as does any later use, and the sandbox leaves
// the list.
func lifetime(t *testing.T, e *env) {
	lt := e.lifetime()
	secs := int64((lt + time.Second - 1) / time.Second)
	start := time.Now()
	o := e.open(t, func(s *model.Spec) { s.LifetimeSeconds = secs; s.TimeoutSeconds = secs })
	opened := time.Now()
	if time.Since(start) < lt-time.Second {
		sh(t, o.sb, "true") // alive before its lifetime ends
	} else {
		t.Logf("the create took %s of the %s lifetime; not checking the sandbox alive first", time.Since(start).Round(time.Millisecond), lt)
	}
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	_, err := o.sb.Run(ctx, []string{"sleep", "60"}, backends.RunOptions{Timeout: 30 * time.Second})
	e.wantClass(t, err, model.ErrSandboxGone, "a command running at the end of the lifetime")
	// The lifetime runs from somewhere within the create call; a vendor
	// may end it early only by its declared granularity.
	if early, slack := time.Since(start), e.lifetimeEarly(); early < time.Duration(secs)*time.Second-slack {
		t.Errorf("SandboxGone %s after the create began, before the lifetime of %ds less %s", early.Round(time.Millisecond), secs, slack)
	}
	if late, bound := time.Since(opened), time.Duration(secs)*time.Second+5*time.Second; late > bound {
		t.Errorf("SandboxGone %s after the create returned, want within %s (lifetime %ds)", late.Round(time.Millisecond), bound, secs)
	}
	_, err = o.sb.Run(ctx, []string{"true"}, backends.RunOptions{})
	e.wantClass(t, err, model.ErrSandboxGone, "a run after the lifetime")
	if o.sb.Info().Running {
		t.Errorf("Info().Running is true after the lifetime ended")
	}
	e.waitNone(t, o.labels, "a sandbox past its lifetime")
}

// killIdempotent: Kill ends the sandbox; again is no error, nor is Close
// after it; the sandbox is gone and unlisted.
func killIdempotent(t *testing.T, e *env) {
	o := e.open(t)
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	for i := range 2 {
		if err := o.sb.Kill(ctx); err != nil {
			t.Fatalf("kill #%d: %v", i+1, err)
		}
	}
	_, err := o.sb.Run(ctx, []string{"true"}, backends.RunOptions{})
	e.wantClass(t, err, model.ErrSandboxGone, "a run after Kill")
	if err := o.sb.Close(ctx); err != nil {
		t.Fatalf("close after kill: %v", err)
	}
	e.waitNone(t, o.labels, "a killed sandbox")
}

// closeIdempotent: Close tears down even with the caller's context already
// cancelled, and again is no error.
func closeIdempotent(t *testing.T, e *env) {
	o := e.open(t)
	sh(t, o.sb, "true")
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	if err := o.sb.Close(cancelled); err != nil {
		t.Fatalf("close with a cancelled context: %v", err)
	}
	if err := o.sb.Close(t.Context()); err != nil {
		t.Fatalf("second close: %v", err)
	}
	_, err := o.sb.Run(t.Context(), []string{"true"}, backends.RunOptions{})
	e.wantClass(t, err, model.ErrSandboxGone, "a run after Close")
	e.waitNone(t, o.labels, "a closed sandbox")
}

// secrets: a secret's value reaches the command, and appears in no error,
// Info, List result, formatted value or vendor-visible plain env.
func secrets(t *testing.T, e *env) {
	canary := "sbx-canary-" + randomHex(12)
	const name = "CONF_SECRET"
	o := e.openWith(t, map[string]string{name: canary}, func(s *model.Spec) {
		s.SecretNames = []string{name}
		s.Env = map[string]string{"CONF_PLAIN": "plain-value"}
	})
	if got := sh(t, o.sb, `printf '%s|%s' "$`+name+`" "$CONF_PLAIN"`); got != canary+"|plain-value" {
		t.Fatalf("the command saw %q, want the secret and the plain env (%d chars, then |plain-value)", got, len(canary))
	}
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	var seen []string
	note := func(what string, err error) {
		if err == nil {
			t.Errorf("%s: want an error, got none", what)
			return
		}
		seen = append(seen, what+": "+err.Error()+fmt.Sprintf(" %+v", err))
	}
	_, err := o.sb.Run(ctx, nil, backends.RunOptions{})
	note("empty command", err)
	_, err = o.sb.RunCode(ctx, "no-such-language", "x", backends.RunOptions{})
	note("unknown language", err)
	note("relative upload", o.sb.Upload(ctx, "relative/path", []byte("x"), 0o644))
	seen = append(seen, fmt.Sprintf("%v %+v %#v", o.sb, o.sb, o.sb), fmt.Sprintf("%v %+v %#v", o.sb.Info(), o.sb.Info(), o.sb.Info()))
	seen = append(seen, fmt.Sprintf("%+v", e.list(t, o.labels)))
	if obs, ok := e.observe(t, o.sb.ID()); ok {
		seen = append(seen, fmt.Sprintf("observed labels %v", obs.Labels))
		if obs.PlainEnv != nil && !e.h.SecretsInPlainEnv {
			seen = append(seen, fmt.Sprintf("observed plain env %v", obs.PlainEnv))
		}
	}
	// A second sandbox whose create fails for a missing secret value.
	spec, _ := e.spec(t, func(s *model.Spec) { s.SecretNames = []string{name, "CONF_MISSING"} })
	_, err = e.h.Backend.Create(ctx, backends.CreateRequest{Spec: spec, Secrets: map[string]string{name: canary}})
	note("create without a secret's value", err)
	if err := o.sb.Kill(ctx); err != nil {
		t.Fatalf("kill: %v", err)
	}
	_, err = o.sb.Run(ctx, []string{"true"}, backends.RunOptions{})
	note("run after kill", err)
	for _, s := range seen {
		if strings.Contains(s, canary) {
			t.Errorf("the secret's value leaked: %s", s)
		}
		e.noLeak(t, "secrets", s)
	}
}

// networkDeny: under egress deny nothing leaves the sandbox, shown from
// inside (no interface but loopback, or a connection that fails) and, where
// observed, by the vendor's control.
func networkDeny(t *testing.T, e *env) {
	o := e.open(t, func(s *model.Spec) { s.Network = model.NetworkPolicy{Egress: model.EgressDeny}.Normalized() })
	if obs, ok := e.observe(t, o.sb.ID()); ok && obs.Network != nil {
		if !obs.Network.Denied || len(obs.Network.Allow) != 0 {
			t.Errorf("the vendor's network control under egress deny: %+v, want denied with no allow list", *obs.Network)
		}
	}
	ifaces := strings.Fields(sh(t, o.sb, "ls /sys/class/net"))
	if len(ifaces) == 1 && ifaces[0] == "lo" {
		return // nothing to leave by
	}
	t.Logf("interfaces under egress deny: %v", ifaces)
	if e.h.EgressTarget == "" {
		t.Fatalf("the sandbox has interfaces %v under egress deny and the harness gives no EgressTarget to show they carry nothing", ifaces)
	}
	host, port, ok := strings.Cut(e.h.EgressTarget, ":")
	if !ok {
		t.Fatalf("EgressTarget %q is not host:port", e.h.EgressTarget)
	}
	res := run(t, o.sb, `nc -w 3 "$1" "$2" </dev/null && echo CONNECTED`, host, port)
	if strings.Contains(string(res.Stdout), "CONNECTED") {
		t.Fatalf("under egress deny the sandbox connected to %s", e.h.EgressTarget)
	}
}

// networkAllow: an allow list (egress deny with allow entries: deny all
// but these, as the HCL contract defines it) is either enforced by the
// vendor's control (observed) or refused with a typed error before
// anything is created.
func networkAllow(t *testing.T, e *env) {
	if len(e.h.AllowList) == 0 {
		// An allow list restricts egress deny (with egress "allow" any list
		// is refused as contradictory, whatever the backend).
		spec, labels := e.spec(t, func(s *model.Spec) {
			s.Network = model.NetworkPolicy{Egress: model.EgressDeny, Allow: []string{"192.0.2.1/32"}}
		})
		ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
		defer cancel()
		sb, err := e.h.Backend.Create(ctx, backends.CreateRequest{Spec: spec})
		if err == nil {
			_ = sb.Close(ctx)
			t.Fatalf("a backend without allow lists opened a sandbox with one")
		}
		if c := classOf(err); c != model.ErrCapabilityNotSupported && c != model.ErrConfiguration {
			t.Fatalf("allow list refused with %v, want CapabilityNotSupported or ConfigurationError", err)
		}
		e.waitNone(t, labels, "a refused create")
		return
	}
	o := e.open(t, func(s *model.Spec) {
		s.Network = model.NetworkPolicy{Egress: model.EgressDeny, Allow: append([]string(nil), e.h.AllowList...)}
	})
	obs, ok := e.observe(t, o.sb.ID())
	if !ok || obs.Network == nil {
		t.Skipf("SKIP: %s reports no vendor network control (Observe), so the allow list cannot be shown applied", e.h.Name)
	}
	if obs.Network.Denied || !sameSet(obs.Network.Allow, e.h.AllowList) {
		t.Fatalf("the vendor's network control: %+v, want the allow list %v", *obs.Network, e.h.AllowList)
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]int{}
	for _, s := range a {
		m[s]++
	}
	for _, s := range b {
		m[s]--
	}
	for _, n := range m {
		if n != 0 {
			return false
		}
	}
	return true
}

// capsScript prints the memory limit in bytes, the CPU quota and period,
// the pids limit and RLIMIT_NPROC, as the sandbox sees them under cgroup v2
// or v1; "-" where not exposed.
const capsScript = `r() { v=-; [ -r "$1" ] && read -r v <"$1"; printf '%s ' "$v"; }
if [ -r /sys/fs/cgroup/memory.max ]; then r /sys/fs/cgroup/memory.max; read -r q p </sys/fs/cgroup/cpu.max 2>/dev/null || { q=-; p=-; }; printf '%s %s ' "$q" "$p"; r /sys/fs/cgroup/pids.max
else r /sys/fs/cgroup/memory/memory.limit_in_bytes; r /sys/fs/cgroup/cpu/cpu.cfs_quota_us; r /sys/fs/cgroup/cpu/cpu.cfs_period_us; r /sys/fs/cgroup/pids/pids.max; fi
ulimit -u`

// caps: the caps apply, shown from inside (cgroup files, RLIMIT_NPROC)
// where the sandbox exposes them, else by the vendor's record.
func caps(t *testing.T, e *env) {
	c := e.h.Caps
	if c == (model.Caps{}) {
		c = model.Caps{CPU: 0.5, MemoryMB: 96, DiskMB: 64, Pids: 64}
	}
	o := e.open(t, func(s *model.Spec) { s.Resources = c })
	f := strings.Fields(sh(t, o.sb, capsScript))
	if len(f) != 5 {
		t.Fatalf("caps script printed %q", f)
	}
	num := func(s string) (int64, bool) { n, err := strconv.ParseInt(s, 10, 64); return n, err == nil }
	var obsCaps model.Caps
	if obs, ok := e.observe(t, o.sb.ID()); ok && obs.Caps != nil {
		obsCaps = *obs.Caps
	}
	var shown, unshown []string
	check := func(name string, inside bool, insideOK bool, insideGot string, observed, want float64) {
		switch {
		case inside:
			if !insideOK {
				t.Errorf("%s seen from inside: %s, want %v", name, insideGot, want)
			}
			shown = append(shown, name+" (inside)")
		case observed != 0:
			if observed != want {
				t.Errorf("%s the vendor enforces: %v, want %v", name, observed, want)
			}
			shown = append(shown, name+" (vendor)")
		default:
			unshown = append(unshown, name)
		}
	}
	mem, memOK := num(f[0])
	check("memory_mb", memOK, mem == c.MemoryMB<<20, f[0]+" bytes", float64(obsCaps.MemoryMB), float64(c.MemoryMB))
	q, qOK := num(f[1])
	p, pOK := num(f[2])
	cpuIn := qOK && pOK && p > 0 && q > 0
	check("cpu", cpuIn, cpuIn && float64(q)/float64(p) == c.CPU, f[1]+"/"+f[2], obsCaps.CPU, c.CPU)
	check("disk_mb", false, false, "", float64(obsCaps.DiskMB), float64(c.DiskMB))
	if e.h.PidsCeiling != nil {
		// Last: the fill leaves the sandbox at its ceiling.
		if pidsFill(t, e, o.sb) {
			shown = append(shown, "pids (the host's ceiling, filled from inside)")
		}
	} else {
		pc, pcOK := num(f[3])
		nproc, nprocOK := num(f[4])
		check("pids", pcOK || nprocOK, pc == c.Pids || nproc == c.Pids, "pids.max "+f[3]+", ulimit -u "+f[4], float64(obsCaps.Pids), float64(c.Pids))
	}
	t.Logf("caps shown: %v; not shown: %v", shown, unshown)
	if len(shown) == 0 {
		t.Skipf("SKIP: %s exposes no cap inside the sandbox and reports none (Observe): caps unverified", e.h.Name)
	}
	for _, n := range unshown {
		if n != "disk_mb" {
			t.Errorf("%s is neither visible inside the sandbox nor reported by Observe", n)
		}
	}
}

// fillScript starts sleeping processes (in a subshell) until a fork is
// refused, printing the count after each and noting each pid in a file;
// the subshell ends at the refusal, and the shell kills the sleepers with
// builtins (no fork is left for anything else) and exits with its status.
// The sleepers hold no stream of the command open.
const fillScript = `f=/tmp/.sandboxio-fill.$$
( i=0; while [ $i -lt 65536 ]; do sleep 120 </dev/null >/dev/null 2>&1 & echo $! >>"$f"; i=$((i+1)); echo $i; done )
rc=$?
while read -r p; do kill "$p" 2>/dev/null; done <"$f"
rm -f "$f"
exit $rc`

// fillSlack is how many tasks besides the fill's sleepers the sandbox may
// hold when a fork is refused: the filling shell, the sandbox's own init
// and the backend's helper processes and their threads.
const fillSlack = 48

// pidsFill shows a host-set process ceiling from inside (Harness.PidsCeiling):
// sleepers are started until a fork is refused, which must happen just
// below the ceiling the backend reports. It reports whether it was shown.
func pidsFill(t *testing.T, e *env, sb backends.Sandbox) bool {
	want, err := e.h.PidsCeiling(sb)
	if err != nil {
		t.Errorf("pids: the backend reports no process ceiling: %v", err)
		return false
	}
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	var out, errb bytes.Buffer
	res, err := sb.Run(ctx, []string{"sh", "-c", fillScript}, backends.RunOptions{Stdout: &out, Stderr: &errb})
	counts := strings.Fields(out.String())
	if len(counts) == 0 {
		t.Errorf("pids: the fill started no process: %v, stderr %q", err, errb.String())
		return false
	}
	n, _ := strconv.ParseInt(counts[len(counts)-1], 10, 64)
	refused := (err != nil && classOf(err) == model.ErrResourceLimitExceeded) || (err == nil && res.ExitCode != 0 && strings.Contains(errb.String(), "fork"))
	t.Logf("pids: a fork was refused after %d sleepers (reported ceiling %d tasks): %v %q", n, want, err, strings.TrimSpace(errb.String()))
	switch {
	case !refused:
		t.Errorf("pids: %d processes started and no fork was refused (exit %d, error %v): no ceiling holds", n, res.ExitCode, err)
	case n > want || n < want-fillSlack:
		t.Errorf("pids: a fork was refused after %d sleepers; the backend reports a ceiling of %d tasks (want %d..%d)", n, want, want-fillSlack, want)
	default:
		return true
	}
	return false
}

// typedErrors: misuse and refusals are typed model errors, and a refused
// create leaves nothing behind.
func typedErrors(t *testing.T, e *env) {
	o := e.open(t)
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	_, err := o.sb.Run(ctx, nil, backends.RunOptions{})
	e.wantClass(t, err, model.ErrConfiguration, "an empty command")
	_, err = o.sb.RunCode(ctx, "no-such-language", "x", backends.RunOptions{})
	e.wantClass(t, err, model.ErrConfiguration, "an unknown language")
	e.wantClass(t, o.sb.Upload(ctx, "relative/path", []byte("x"), 0o644), model.ErrConfiguration, "an upload to a relative path")

	learn := func(s *model.Spec) { s.Network = model.NetworkPolicy{Egress: model.EgressLearn}.Normalized() }
	refused := []struct {
		what string
		mod  func(*model.Spec)
	}{
		{"a zero pids cap", func(s *model.Spec) { s.Resources.Pids = 0 }},
		{"a zero lifetime", func(s *model.Spec) { s.LifetimeSeconds = 0 }},
		{"a missing image or template", func(s *model.Spec) { s.Image = "sandboxio/no-such-image-" + e.runID + ":conformance" }},
		// No backend brokers secrets in this build (the gateway's broker
		// is not wired into create yet): a spec with one is refused before
		// anything exists, never run with the value in the environment.
		{"a brokered secret", func(s *model.Spec) {
			s.BrokeredSecrets = map[string]model.BrokeredSecret{"CONF_BROKERED": {Hosts: []string{"api.example.com"}, Header: "Authorization", Format: "%s"}}
		}},
	}
	if (o.sb.Info().BlockedEgress != nil) != e.h.ObservesEgress {
		t.Errorf("a deny sandbox reports blocked_egress %v; the harness says the backend observes egress: %v", o.sb.Info().BlockedEgress, e.h.ObservesEgress)
	}
	if e.h.ObservesEgress {
		spec, _ := e.spec(t, learn)
		sb, err := e.h.Backend.Create(ctx, backends.CreateRequest{Spec: spec})
		if err != nil {
			t.Errorf(`egress "learn" on a backend that observes egress: %v`, err)
		} else {
			if sb.Info().BlockedEgress == nil {
				t.Errorf(`egress "learn": the sandbox reports no blocked_egress`)
			}
			_ = sb.Close(ctx)
		}
	} else {
		refused = append(refused, struct {
			what string
			mod  func(*model.Spec)
		}{`egress "learn"`, learn})
	}
	for _, c := range refused {
		spec, labels := e.spec(t, c.mod)
		sb, err := e.h.Backend.Create(ctx, backends.CreateRequest{Spec: spec})
		if err == nil {
			_ = sb.Close(ctx)
			t.Errorf("%s: the create succeeded", c.what)
			continue
		}
		e.noLeak(t, c.what, err.Error())
		if cl := classOf(err); cl != model.ErrConfiguration && cl != model.ErrCapabilityNotSupported {
			t.Errorf("%s: %v, want ConfigurationError or CapabilityNotSupported", c.what, err)
		}
		e.waitNone(t, labels, c.what)
	}
}

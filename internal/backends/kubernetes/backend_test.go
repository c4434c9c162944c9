package kubernetes

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The hardening is shown from inside the pod, not from the spec sent.
func TestAccHardeningFromInside(t *testing.T) {
	b := needCluster(t)
	s := open(t, b, backends.CreateRequest{Spec: testSpec(tenant())})
	status := sh(t, s, "cat /proc/self/status")
	for _, want := range []string{"CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
		if !strings.Contains(status, want) {
			t.Errorf("/proc/self/status lacks %q:\n%s", want, status)
		}
	}
	if out := sh(t, s, "ls /var/run/secrets/kubernetes.io 2>&1 || true"); !strings.Contains(out, "No such file") {
		t.Errorf("a service-account token is mounted: %s", out)
	}
	if res := run(t, s, "sh", "-c", "echo x > /x"); res.ExitCode == 0 {
		t.Error("the root filesystem is writable")
	}
	// The memory cap, and swap bounded by it (cgroup v1).
	mem := sh(t, s, "cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/memory/memory.memsw.limit_in_bytes")
	if want := fmt.Sprintf("%d\n%d", 128<<20, 128<<20); mem != want {
		t.Errorf("memory and memsw limits %q, want %q", mem, want)
	}
	// The writable volumes are size-limited tmpfs adding up to disk_mb.
	df := sh(t, s, "df -k /tmp /work /var/tmp /root /home /dev/shm | tail -n +2")
	var total int64
	for _, line := range strings.Split(df, "\n") {
		f := strings.Fields(line)
		n, _ := strconv.ParseInt(f[1], 10, 64)
		total += n
		if f[0] != "tmpfs" {
			t.Errorf("a writable volume is not tmpfs: %s", line)
		}
	}
	if total != 64*1024 {
		t.Errorf("writable volumes total %d KiB, want %d", total, 64*1024)
	}
	_, err := s.Run(t.Context(), []string{"sh", "-c", "dd if=/dev/zero of=/tmp/f bs=1k count=40000"}, backends.RunOptions{})
	var me *model.Error
	if !asModel(err, &me) || me.Class != model.ErrResourceLimitExceeded || me.Limit != model.LimitDisk {
		t.Errorf("writing past /tmp's share of disk_mb: %v, want ResourceLimitExceeded(disk)", err)
	}
	in := s.Info()
	if in.Tier != model.TierContainer || !strings.Contains(in.PidsCapStrategy, "EAGAIN") || !strings.HasPrefix(in.DiskCapStrategy, "emptyDir") {
		t.Errorf("info: tier %s, pids %q, disk %q", in.Tier, in.PidsCapStrategy, in.DiskCapStrategy)
	}
	t.Logf("pids: %s", in.PidsCapStrategy)
	// Tenant, session and template labels select the pod.
	if n := podsLeft(t, b, map[string]string{model.LabelTenantID: in.Labels[model.LabelTenantID], model.LabelSessionID: "s1", model.LabelTemplate: "k8s-test"}); n != 1 {
		t.Errorf("%d pods by tenant/session/template label, want 1", n)
	}
}

// Exit codes, stdout/stderr, stdin, env and workdir reach the command.
func TestAccRunBasics(t *testing.T) {
	b := needCluster(t)
	s := open(t, b, backends.CreateRequest{Spec: testSpec(tenant())})
	res, err := s.Run(t.Context(), []string{"sh", "-c", `pwd; echo "$A"; cat; echo err >&2; exit 3`},
		backends.RunOptions{Stdin: []byte("from-stdin\n"), Env: map[string]string{"A": "b c"}, Workdir: "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || string(res.Stdout) != "/tmp\nb c\nfrom-stdin\n" || string(res.Stderr) != "err\n" {
		t.Errorf("got exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if res := run(t, s, "no-such-command"); res.ExitCode != 127 {
		t.Errorf("missing command: exit %d, %s", res.ExitCode, res.Stderr)
	}
	if err := s.Upload(t.Context(), "/work/d/f.txt", []byte("up"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := sh(t, s, "cat /work/d/f.txt; stat -c %a /work/d/f.txt"); out != "up600" && out != "up\n600" {
		t.Errorf("upload: %q", out)
	}
	res, err = s.RunCode(t.Context(), "sh", "echo 42", backends.RunOptions{})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "42" {
		t.Errorf("runcode: %v %q", err, res.Stdout)
	}
}

// A timeout kills the command's processes (shown by ps inside) and is an
// ExecutionTimeout.
func TestAccExecTimeout(t *testing.T) {
	b := needCluster(t)
	s := open(t, b, backends.CreateRequest{Spec: testSpec(tenant())})
	start := time.Now()
	_, err := s.Run(t.Context(), []string{"sh", "-c", "sleep 1000 & sleep 1001"}, backends.RunOptions{Timeout: 2 * time.Second})
	if class(err) != model.ErrExecutionTimeout {
		t.Fatalf("got %v, want ExecutionTimeout", err)
	}
	t.Logf("timeout reported after %s", time.Since(start))
	if ps := sh(t, s, "ps -o args | grep 'sleep 10' | grep -v grep || true"); ps != "" {
		t.Errorf("processes left after the timeout: %s", ps)
	}
}

// A killer that misses its budget (forced here: a wait of 1 ns) does not
// cost the sandbox: the timeout is reported in time, the killer goes on,
// the next command waits for it and sees none of the timed-out command's
// processes, and another command's process survives.
func TestAccSlowKillerKeepsTheSandbox(t *testing.T) {
	b := needCluster(t)
	s := open(t, b, backends.CreateRequest{Spec: testSpec(tenant())})
	s.(*sandbox).killWait = time.Nanosecond
	run(t, s, "sh", "-c", "sleep 1002 >/dev/null 2>&1 &")
	start := time.Now()
	_, err := s.Run(t.Context(), []string{"sh", "-c", "sleep 1000 & sleep 1001"}, backends.RunOptions{Timeout: 2 * time.Second})
	took := time.Since(start)
	if class(err) != model.ErrExecutionTimeout || !strings.Contains(err.Error(), "being killed") {
		t.Fatalf("got %v, want an ExecutionTimeout saying the processes are being killed", err)
	}
	if took > 5*time.Second {
		t.Errorf("the timeout was reported after %s (2 s timeout)", took)
	}
	ps := sh(t, s, "ps -o args | grep 'sleep 100' | grep -v grep || true")
	if strings.Contains(ps, "sleep 1000") || strings.Contains(ps, "sleep 1001") {
		t.Errorf("the timed-out command's processes are there for the next command: %s", ps)
	}
	if !strings.Contains(ps, "sleep 1002") {
		t.Errorf("another command's process did not survive the kill: %q", ps)
	}
	if !s.Info().Running {
		t.Errorf("the sandbox was lost to a slow killer")
	}
}

// Output past the cap is ResourceLimitExceeded(output), never truncated.
func TestAccOutputCap(t *testing.T) {
	b := needCluster(t)
	s := open(t, b, backends.CreateRequest{Spec: testSpec(tenant())})
	_, err := s.Run(t.Context(), []string{"sh", "-c", "yes xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}, backends.RunOptions{})
	var me *model.Error
	if !asModel(err, &me) || me.Class != model.ErrResourceLimitExceeded || me.Limit != model.LimitOutput {
		t.Fatalf("got %v, want ResourceLimitExceeded(output)", err)
	}
	if ps := sh(t, s, "ps -o args | grep '^yes' || true"); ps != "" {
		t.Errorf("yes still runs: %s", ps)
	}
}

// What the network lock cannot enforce is refused before anything is
// created: domain entries (routes follow addresses, not names), IPv6
// entries (IPv6 is cut in every mode) and learn (nothing records blocked
// attempts here).
func TestAccEgressUnenforceableRefused(t *testing.T) {
	b := needCluster(t)
	tn := tenant()
	for _, n := range []model.NetworkPolicy{{Egress: model.EgressDeny, Allow: []string{"example.com"}},
		{Egress: model.EgressDeny, Allow: []string{"2001:db8::/32"}}, {Egress: model.EgressLearn}} {
		spec := testSpec(tn)
		spec.Network = n
		_, err := b.Create(t.Context(), backends.CreateRequest{Spec: spec})
		var me *model.Error
		if !asModel(err, &me) || me.Class != model.ErrCapabilityNotSupported || (me.Rule != rules.NetAllowKind && me.Rule != rules.NetLearn) {
			t.Errorf("network %+v: got %v, want CapabilityNotSupported", n, err)
		}
	}
	if n := podsLeft(t, b, map[string]string{model.LabelTenantID: tn}); n != 0 {
		t.Errorf("%d pods created for refused specs", n)
	}
}

// The kubelet ends the pod at its lifetime (activeDeadlineSeconds) with no
// client around; a Run then is SandboxGone saying so. A pod deleted from
// outside is SandboxGone with a fix that says that instead.
func TestAccLifetimeAndGone(t *testing.T) {
	b := needCluster(t)
	spec := testSpec(tenant())
	spec.LifetimeSeconds = 8
	s := open(t, b, backends.CreateRequest{Spec: spec})
	deadline := time.Now().Add(60 * time.Second)
	for {
		pod, err := b.cs.CoreV1().Pods(b.namespace).Get(t.Context(), s.ID(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pod.Status.Reason == "DeadlineExceeded" && !anyRunning(pod) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pod still runs after its lifetime: %s %s", pod.Status.Phase, pod.Status.Reason)
		}
		time.Sleep(500 * time.Millisecond)
	}
	_, err := s.Run(t.Context(), []string{"true"}, backends.RunOptions{})
	var me *model.Error
	if !asModel(err, &me) || me.Class != model.ErrSandboxGone || !strings.Contains(me.Message, "lifetime") || !strings.Contains(me.Fix, "lifetime_seconds") {
		t.Errorf("after the lifetime: %v", err)
	}

	s2 := open(t, b, backends.CreateRequest{Spec: testSpec(tenant())})
	if err := b.deletePod(t.Context(), s2.ID()); err != nil {
		t.Fatal(err)
	}
	_ = b.stopped(t.Context(), s2.ID())
	_, err = s2.Run(t.Context(), []string{"true"}, backends.RunOptions{})
	if !asModel(err, &me) || me.Class != model.ErrSandboxGone || !strings.Contains(me.Fix, "deleted from outside") {
		t.Errorf("after a delete from outside: %v", err)
	}
}

// A RuntimeClass named gvisor whose handler runs runc: the pod sees the
// node's kernel, so the sandbox is CONTAINER, and a GVISOR requirement on
// it is refused (and its pod removed).
func TestAccGVisorNamedRuncIsContainer(t *testing.T) {
	b := needCluster(t)
	ctx := t.Context()
	rcs := b.cs.NodeV1().RuntimeClasses()
	_, err := rcs.Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor", Labels: map[string]string{model.LabelManaged: "true"}}, Handler: "runc"}, metav1.CreateOptions{})
	switch {
	case err == nil:
		t.Cleanup(func() { _ = rcs.Delete(context.WithoutCancel(t.Context()), "gvisor", metav1.DeleteOptions{}) })
	case apierrors.IsAlreadyExists(err):
		rc, gerr := rcs.Get(ctx, "gvisor", metav1.GetOptions{})
		if gerr != nil || rc.Handler != "runc" {
			t.Skipf("a RuntimeClass gvisor exists with handler %q", rc.Handler)
		}
	default:
		t.Fatal(err)
	}
	d, err := backends.ParseDSN(testDSN("runtime_class=gvisor"))
	if err != nil {
		t.Fatal(err)
	}
	gb, err := Open(d)
	if err != nil {
		t.Fatal(err)
	}
	gb.namespace = b.namespace

	tn := tenant()
	spec := testSpec(tn)
	spec.Backend = d.String()
	spec.RequireIsolation = model.TierGVisor
	_, err = gb.Create(ctx, backends.CreateRequest{Spec: spec})
	var me *model.Error
	if !asModel(err, &me) || me.Rule != rules.IsoBelow || !strings.Contains(me.Message, "CONTAINER") {
		t.Fatalf("GVISOR on a runc-backed gvisor class: got %v, want a refusal under %s naming CONTAINER", err, rules.IsoBelow)
	}
	t.Logf("refused: %v", err)
	waitNoPods(t, b, map[string]string{model.LabelTenantID: tn})

	spec.RequireIsolation = ""
	s := open(t, gb, backends.CreateRequest{Spec: spec})
	if s.Info().Tier != model.TierContainer {
		t.Errorf("tier %s, want CONTAINER", s.Info().Tier)
	}
	pod, err := b.cs.CoreV1().Pods(b.namespace).Get(ctx, s.ID(), metav1.GetOptions{})
	if err != nil || pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName != "gvisor" {
		t.Errorf("the pod does not run under RuntimeClass gvisor: %v", err)
	}
}

func waitNoPods(t *testing.T, b *k8sBackend, lbl map[string]string) {
	t.Helper()
	for i := 0; i < 100 && podsLeft(t, b, lbl) > 0; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if n := podsLeft(t, b, lbl); n != 0 {
		t.Errorf("%d pods left", n)
	}
}

// A secret reaches the command's environment, yet is in no API object (etcd
// holds every one) and in no API server log, audit log included.
func TestAccSecretsNotInEtcdOrAudit(t *testing.T) {
	b := needCluster(t)
	canary := "sbxcanary" + randomHex(12)
	spec := testSpec(tenant())
	spec.SecretNames = []string{"API_TOKEN"}
	s := open(t, b, backends.CreateRequest{Spec: spec, Secrets: map[string]string{"API_TOKEN": canary}})
	if got := sh(t, s, `echo "$API_TOKEN"`); got != canary {
		t.Fatalf("the secret inside the sandbox is %q", got)
	}
	// And in a command's process environment, read from /proc.
	if got := sh(t, s, `tr '\0' '\n' < /proc/$$/environ | grep API_TOKEN`); got != "API_TOKEN="+canary {
		t.Errorf("environ: %q", got)
	}
	run := os.Getenv("SANDBOXIO_K8S_RUN")
	if run == "" {
		run = "/var/tmp/sandboxio-k8s"
	}
	for _, f := range []string{"logs/audit.log", "logs/kube-apiserver.log", "logs/kubelet.log", "logs/containerd.log"} {
		b, err := os.ReadFile(run + "/" + f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if bytes.Contains(b, []byte(canary)) {
			t.Errorf("the canary is in %s", f)
		}
		if f == "logs/audit.log" && !bytes.Contains(b, []byte(s.ID())) {
			t.Errorf("the audit log does not mention the sandbox pod %s: it shows nothing", s.ID())
		}
	}
	keys, hits := etcdScan(t, canary)
	if hits != 0 {
		t.Errorf("the canary is in %d etcd values", hits)
	}
	if keys < 50 {
		t.Errorf("etcd returned only %d keys: the scan saw nothing", keys)
	}
	t.Logf("canary absent from %d etcd keys and the API server's logs", keys)
}

// etcdScan reads every key and value of the cluster's etcd (the v3 API's
// JSON gateway: Debian's etcd-server ships no etcdctl) and counts the values
// holding needle.
func etcdScan(t *testing.T, needle string) (keys, hits int) {
	t.Helper()
	body := `{"key":"AA==","range_end":"AA=="}`
	resp, err := http.Post("http://127.0.0.1:23790/v3/kv/range", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("etcd: %v", err)
	}
	defer resp.Body.Close()
	var r struct {
		Kvs []struct{ Key, Value string } `json:"kvs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("etcd: %v", err)
	}
	for _, kv := range r.Kvs {
		v, _ := base64.StdEncoding.DecodeString(kv.Value)
		k, _ := base64.StdEncoding.DecodeString(kv.Key)
		if bytes.Contains(v, []byte(needle)) || bytes.Contains(k, []byte(needle)) {
			hits++
		}
	}
	return len(r.Kvs), hits
}

func asModel(err error, me **model.Error) bool {
	return err != nil && errorsAs(err, me)
}

// The helper process for the reap test: it opens a sandbox, prints its id
// and waits to be killed.
const helperEnv = "SANDBOXIO_K8S_TEST_HELPER"

func helperMain() int {
	b, err := Open(mustDSN(os.Getenv(helperEnv)))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	spec := testSpec(os.Getenv(helperEnv + "_TENANT"))
	spec.Backend = os.Getenv(helperEnv)
	s, err := b.Create(context.Background(), backends.CreateRequest{Spec: spec})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("id", s.ID())
	time.Sleep(10 * time.Minute)
	return 0
}

func mustDSN(s string) backends.DSN {
	d, err := backends.ParseDSN(s)
	if err != nil {
		panic(err)
	}
	return d
}

// Reap removes the pods of an owner killed with SIGKILL, and pods past
// their lifetime; it leaves a live owner's pods alone.
func TestAccReap(t *testing.T) {
	b := needCluster(t)
	tn := tenant()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+testDSN(""), helperEnv+"_TENANT="+tn)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if !strings.HasPrefix(line, "id ") {
		_ = cmd.Process.Kill()
		t.Fatalf("helper: %q", line)
	}
	sel := map[string]string{model.LabelTenantID: tn}
	// The owner is alive: nothing to reap.
	if r, err := b.Reap(t.Context(), backends.ReapOptions{Labels: sel}); err != nil || len(r) != 0 {
		t.Fatalf("reap with the owner alive: %v %v", r, err)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	r, err := b.Reap(t.Context(), backends.ReapOptions{Labels: sel})
	if err != nil || len(r) != 1 || r[0].Reason != "owner gone" || r[0].Info.ID != strings.TrimSpace(line[3:]) {
		t.Fatalf("reap after SIGKILL: %+v %v", r, err)
	}
	waitNoPods(t, b, sel)

	// Past its lifetime (by the reaper's clock): expired, even with this
	// live process as its owner.
	tn2 := tenant()
	s := open(t, b, backends.CreateRequest{Spec: testSpec(tn2)})
	sel2 := map[string]string{model.LabelTenantID: tn2}
	if r, _ := b.Reap(t.Context(), backends.ReapOptions{Labels: sel2}); len(r) != 0 {
		t.Fatalf("a live sandbox was reaped: %+v", r)
	}
	r, err = b.Reap(t.Context(), backends.ReapOptions{Labels: sel2, Now: time.Now().Add(time.Hour)})
	if err != nil || len(r) != 1 || r[0].Reason != "expired" || r[0].Info.ID != s.ID() {
		t.Fatalf("reap past the lifetime: %+v %v", r, err)
	}
	waitNoPods(t, b, sel2)
}

// `sandboxio reap` with no backend opens kubernetes with no context and no
// namespace: the current context, every namespace.
func TestAccReapSweepsEveryNamespace(t *testing.T) {
	b := needCluster(t)
	tn := tenant()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+testDSN(""), helperEnv+"_TENANT="+tn)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if !strings.HasPrefix(line, "id ") {
		t.Fatalf("helper: %q", line)
	}
	sweep, err := Open(backends.DSN{Scheme: Name, Options: map[string]string{}})
	if err != nil {
		t.Fatal(err)
	}
	sel := map[string]string{model.LabelTenantID: tn}
	r, err := sweep.Reap(t.Context(), backends.ReapOptions{Labels: sel})
	if err != nil || len(r) != 1 || r[0].Reason != "owner gone" {
		t.Fatalf("sweep: %+v %v", r, err)
	}
	waitNoPods(t, b, sel)
}

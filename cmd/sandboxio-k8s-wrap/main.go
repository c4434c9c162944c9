//go:build linux

// Command sandboxio-k8s-wrap is the fixed program every exec of a Kubernetes
// sandbox runs (see internal/backends/kubernetes). Built static into a one-file
// image and copied into the pod by an init container, it needs no shell in the
// user's image. Modes:
//
//	install DEST   copy this binary to DEST (the init container)
//	hold           PID 1 of the sandbox container: reap orphans, never exit
//	run -- CMD...  read the exec block from stdin, then exec CMD
//	kill SID       kill every process of session SID
//	probe          report what the sandbox shows from inside
//	fill           create threads until the kernel refuses one (pids probe)
//	lock MODE ...  lock the pod's network namespace (netlock.go)
//	listen PORT    the egress probe's listener (netprobe.go)
//	netprobe T...  the egress probe's client (netprobe.go)
package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Protocol names the exec block's format; the backend checks it.
const Protocol = "sandboxio-wrap/1"

const maxBlock = 1 << 20

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: wrap install|hold|run|kill|probe|fill|lock|listen|netprobe")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "install":
		os.Exit(install(os.Args[2:]))
	case "hold":
		hold()
	case "run":
		os.Exit(run(os.Args[2:]))
	case "kill":
		os.Exit(killSession(os.Args[2:]))
	case "probe":
		os.Exit(probe(len(os.Args) > 2 && os.Args[2] == "nofill"))
	case "fill":
		fill()
	case "put":
		os.Exit(put(os.Args[2:]))
	case "stat":
		fmt.Printf("\x1esandboxio-stat\x1e oom_kill=%s\n", oomKills())
	case "lock":
		os.Exit(lock(os.Args[2:]))
	case "listen":
		os.Exit(listen(os.Args[2:]))
	case "netprobe":
		os.Exit(netprobe(os.Args[2:]))
	case "version":
		fmt.Println(Protocol)
	default:
		fmt.Fprintln(os.Stderr, "wrap: unknown mode", os.Args[1])
		os.Exit(2)
	}
}

func install(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: wrap install DEST")
		return 2
	}
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		fmt.Fprintln(os.Stderr, "wrap install:", err)
		return 1
	}
	tmp := args[0] + ".tmp"
	if err := os.WriteFile(tmp, self, 0o555); err != nil {
		fmt.Fprintln(os.Stderr, "wrap install:", err)
		return 1
	}
	if err := os.Rename(tmp, args[0]); err != nil {
		fmt.Fprintln(os.Stderr, "wrap install:", err)
		return 1
	}
	return 0
}

// hold is the container's PID 1: it reaps the orphans exec'd commands leave,
// so that zombies do not eat into the process ceiling, and ends on SIGTERM.
func hold() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}

// readBlock reads exactly the exec block: no byte of the command's own input
// is consumed (os.Stdin is unbuffered). The block keeps secrets and the
// environment out of the exec's argv, which the API server's audit log
// records: a 4-byte big-endian length, then NUL-separated fields, the
// working directory first, then NAME=value pairs.
func readBlock(r io.Reader) (workdir string, env []string, err error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return "", nil, fmt.Errorf("exec block length: %w", err)
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxBlock {
		return "", nil, fmt.Errorf("exec block of %d bytes", size)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", nil, fmt.Errorf("exec block: %w", err)
	}
	fields := strings.Split(string(b), "\x00")
	workdir = fields[0]
	for _, f := range fields[1:] {
		if f != "" {
			env = append(env, f)
		}
	}
	return workdir, env, nil
}

// run reads the exec block, starts a session of its own (the command's
// processes are killed by session on a timeout), reports its pid on stderr
// and replaces itself with the command.
func run(args []string) int {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	workdir, env, err := readBlock(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandboxio wrap:", err)
		return 126
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "sandboxio wrap: no command")
		return 126
	}
	_, _ = syscall.Setsid()
	fmt.Fprintf(os.Stderr, "\x1esandboxio-pid:%d\x1e", os.Getpid())
	if workdir != "" {
		if err := os.Chdir(workdir); err != nil {
			fmt.Fprintf(os.Stderr, "sh: cd: %s: %v\n", workdir, err)
			return 2
		}
	}
	full := append(os.Environ(), env...)
	path := args[0]
	if !strings.Contains(path, "/") {
		p, err := lookPath(path, full)
		if err != nil {
			fmt.Fprintf(os.Stderr, "sh: %s: not found\n", path)
			return 127
		}
		path = p
	}
	err = syscall.Exec(path, args, full)
	fmt.Fprintf(os.Stderr, "sh: %s: %v\n", args[0], err)
	if errors.Is(err, syscall.ENOENT) {
		return 127
	}
	return 126
}

// lookPath searches PATH as the command will see it (the block may set it).
func lookPath(name string, env []string) (string, error) {
	path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// procs lists the live processes (pid, session) of the pid namespace.
func procs() map[int]int {
	out := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 4 || f[0] == "Z" {
			continue
		}
		sid, _ := strconv.Atoi(f[3])
		out[pid] = sid
	}
	return out
}

// killSession kills every process of a session until none is left, and
// prints how many were left (0 unless they would not die).
func killSession(args []string) int {
	if len(args) != 1 {
		return 2
	}
	sid, err := strconv.Atoi(args[0])
	if err != nil || sid <= 1 {
		return 2
	}
	left := 0
	for i := 0; i < 50; i++ {
		_ = syscall.Kill(-sid, syscall.SIGKILL)
		left = 0
		for pid, s := range procs() {
			if s == sid {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				left++
			}
		}
		if left == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Printf("\x1esandboxio-kill\x1e left=%d\n", left)
	return 0
}

func readTrim(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return "-"
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "-"
	}
	return strings.ReplaceAll(s, " ", "_")
}

func statusField(name string) string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "-"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "-"
}

func meminfo(name string) string {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "-"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				return f[0]
			}
		}
	}
	return "-"
}

// probe prints one line of key=value facts, read from inside the sandbox:
// the kernel, the capabilities of a process here, the network links, the
// cgroup's memory and swap limits, and the process ceiling measured by
// filling it (a child that creates threads until the kernel refuses one).
func probe(nofill bool) int {
	var u syscall.Utsname
	_ = syscall.Uname(&u)
	rel := make([]byte, 0, len(u.Release))
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		rel = append(rel, byte(c))
	}
	var links []string
	ents, _ := os.ReadDir("/sys/class/net")
	for _, e := range ents {
		links = append(links, e.Name()+":"+readTrim("/sys/class/net/"+e.Name()+"/operstate"))
	}
	facts := [][2]string{
		{"protocol", Protocol},
		{"kernel", string(rel)},
		{"cap_eff", statusField("CapEff")},
		{"no_new_privs", statusField("NoNewPrivs")},
		{"seccomp", statusField("Seccomp")},
		{"uid", strconv.Itoa(os.Getuid())},
		{"links", strings.Join(links, ",")},
		{"mem_limit", readTrim("/sys/fs/cgroup/memory/memory.limit_in_bytes")},
		{"memsw_limit", readTrim("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes")},
		{"mem_max_v2", readTrim("/sys/fs/cgroup/memory.max")},
		{"swap_max_v2", readTrim("/sys/fs/cgroup/memory.swap.max")},
		{"swap_total_kb", meminfo("SwapTotal")},
		{"pids_max", readTrim("/sys/fs/cgroup/pids/pids.max")},
		{"root_ro", rootReadOnly()},
		{"net_lock", lockState()},
		{"links_up", linksUp()},
	}
	tasks, refused := "-", "skipped"
	if !nofill {
		tasks, refused = fillCeiling()
	}
	facts = append(facts, [2]string{"pids_ceiling", tasks}, [2]string{"pids_refused", refused})
	var b strings.Builder
	b.WriteString("\x1esandboxio-probe\x1e")
	for _, f := range facts {
		v := f[1]
		if v == "" {
			v = "-"
		}
		b.WriteString(" " + f[0] + "=" + v)
	}
	fmt.Println(b.String())
	return 0
}

func rootReadOnly() string {
	var st syscall.Statfs_t
	if err := syscall.Statfs("/", &st); err != nil {
		return "-"
	}
	return strconv.FormatBool(st.Flags&0x1 != 0) // ST_RDONLY
}

// cgroupTasks counts the tasks of this container's pids cgroup.
func cgroupTasks() int {
	n, err := strconv.Atoi(readTrim("/sys/fs/cgroup/pids/pids.current"))
	if err != nil {
		return -1
	}
	return n
}

// fillCeiling runs the fill child and returns the number of tasks in the
// container's pids cgroup when the kernel refused a new one, and why it was
// refused ("eagain" is the ceiling; anything else proves nothing).
func fillCeiling() (string, string) {
	spareThreads(8)
	cmd := exec.Command("/proc/self/exe", "fill")
	out, _ := cmd.CombinedOutput()
	s := string(out)
	// The Go runtime reports a refused thread as
	// "runtime: failed to create new OS thread (have N already; errno=11)".
	i := strings.Index(s, "failed to create new OS thread (have ")
	if i < 0 {
		return "-", "none"
	}
	rest := s[i+len("failed to create new OS thread (have "):]
	nStr, rest, _ := strings.Cut(rest, " ")
	n, err := strconv.Atoi(nStr)
	if err != nil {
		return "-", "unparsed"
	}
	why := "other"
	if strings.HasPrefix(rest, "already; errno=11)") {
		why = "eagain"
	}
	// The child's threads (n, and the one refused) plus this process's
	// threads and the container's other tasks when the child started.
	base := -1
	if v := strings.Index(s, "\x1ebase="); v >= 0 {
		base, _ = strconv.Atoi(strings.TrimSpace(strings.SplitN(s[v+6:], "\x1e", 2)[0]))
	}
	if base < 0 {
		return "-", why
	}
	return strconv.Itoa(base + n), why
}

// spareThreads makes n OS threads and lets them go idle. While the fill
// child holds every task the cgroup has left, this process must not need a
// new thread (the Go runtime dies of a refused one: seen failing a probe
// once in a full run); the runtime keeps idle threads for reuse, so the
// ones made here serve it meanwhile.
func spareThreads(n int) {
	var ready sync.WaitGroup
	release := make(chan struct{})
	for range n {
		ready.Add(1)
		go func() {
			runtime.LockOSThread()
			ready.Done()
			<-release
			runtime.UnlockOSThread() // unlocked, the thread is kept, not ended
		}()
	}
	ready.Wait()
	close(release)
}

// fill creates OS threads until the kernel refuses one; the Go runtime then
// ends the process with the count. It first reports the container's task
// count before it started (itself included, one thread).
func fill() {
	debug.SetMaxThreads(1 << 20)
	// The container's tasks other than this process's own threads.
	threads, _ := strconv.Atoi(statusField("Threads"))
	fmt.Fprintf(os.Stderr, "\x1ebase=%d\x1e\n", cgroupTasks()-threads)
	block := make(chan struct{})
	for i := 0; i < 1<<16; i++ {
		go func() {
			runtime.LockOSThread()
			<-block
		}()
		if i%64 == 0 {
			runtime.Gosched()
		}
	}
	time.Sleep(30 * time.Second)
	fmt.Fprintln(os.Stderr, "no refusal")
	os.Exit(3)
}

// put writes stdin to PATH with MODE (octal), creating its directory: the
// upload, with no shell needed in the image.
func put(args []string) int {
	if len(args) != 2 {
		return 2
	}
	mode, err := strconv.ParseUint(args[1], 8, 32)
	if err != nil {
		return 2
	}
	if err := os.MkdirAll(filepath.Dir(args[0]), 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	f, err := os.OpenFile(args[0], os.O_CREATE|os.O_TRUNC|os.O_WRONLY, os.FileMode(mode))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := io.Copy(f, os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := f.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := os.Chmod(args[0], os.FileMode(mode)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// oomKills is the container memory cgroup's OOM kill count ("-" if unseen).
func oomKills() string {
	for _, p := range []string{"/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events"} {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
				return strings.TrimSpace(v)
			}
		}
	}
	return "-"
}

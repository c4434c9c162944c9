package docker

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The sandbox init: PID 1 of every Docker sandbox is this very binary,
// bind-mounted read-only. The kernel shields a namespace's init from signals
// sent inside it, and the init is non-dumpable, so the lifetime is kept by a
// process the sandbox can neither stop nor outlive.
// See docs/design/docker-lifetime.md.
const (
	// initTarget is where the init is mounted in the sandbox. Its base name
	// is the init's comm (/proc/1/status Name), at most 15 characters.
	initTarget = "/.sandboxio-init"
	// initProto is the first argument of the init's command line: the
	// protocol between the backend and an init of the same build.
	initProto = "sandboxio-init-v1"
	// InitEnv names a static Linux sandboxio binary to run as the sandbox
	// init instead of this process's own executable (which must then be
	// static itself).
	InitEnv = "SANDBOXIO_INIT"
)

// The package's init hands PID 1 of a sandbox to the init before main runs,
// as reaper.go does for the watcher. Only PID 1 started at initTarget with
// the protocol argument is taken: the binary run any other way is itself.
//
// The loop runs on a goroutine of its own: a package init runs locked to the
// main thread, and a locked goroutine that blocks makes the runtime start
// another thread to hand its P to. At the process ceiling there is none to
// start, and the Go runtime dies of it, taking the sandbox down with it.
func init() {
	if len(os.Args) > 1 && os.Args[0] == initTarget && os.Args[1] == probeProto {
		os.Exit(probeMain(os.Args[2:]))
	}
	if os.Getpid() == 1 && len(os.Args) > 1 && os.Args[0] == initTarget && os.Args[1] == initProto {
		code := make(chan int, 1)
		go func() { code <- initMain(os.Args[2:]) }()
		os.Exit(<-code)
	}
}

// initCommand is the init's command line. A cold sandbox ends at the earlier
// of its lifetime counted on the init's boot-time clock from its start and
// the wall-clock expiry (the label the reaper reads); a warm one at its idle
// bound unless the claim line comes first, and then at claim + lifetime.
func initCommand(p createPlan) []string {
	cmd := []string{initTarget, initProto}
	if p.warmIdle > 0 {
		return append(cmd, "warm", strconv.FormatInt(int64(p.warmIdle), 10), strconv.FormatInt(p.idleUntil.UnixNano(), 10),
			strconv.FormatInt(int64(p.lifetime), 10), strconv.FormatInt(p.expires.UnixNano(), 10))
	}
	return append(cmd, "cold", strconv.FormatInt(int64(p.lifetime), 10), strconv.FormatInt(p.expires.UnixNano(), 10))
}

// initArgs is the parsed command line of the init.
type initArgs struct {
	warm     bool
	idle     time.Duration // warm: the idle bound
	idleWall time.Time     // warm: the idle bound on the wall clock
	lifetime time.Duration
	wall     time.Time // the expiry on the wall clock
}

func parseInitArgs(args []string) (initArgs, error) {
	num := func(s string) (int64, error) {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("%q is not a positive integer", s)
		}
		return n, nil
	}
	var a initArgs
	var ns []int64
	switch {
	case len(args) == 3 && args[0] == "cold":
	case len(args) == 5 && args[0] == "warm":
		a.warm = true
	default:
		return a, fmt.Errorf("usage: %s %s cold LIFETIME_NS EXPIRES_UNIX_NS | warm IDLE_NS IDLE_UNIX_NS LIFETIME_NS EXPIRES_UNIX_NS", initTarget, initProto)
	}
	for _, s := range args[1:] {
		n, err := num(s)
		if err != nil {
			return a, err
		}
		ns = append(ns, n)
	}
	if a.warm {
		a.idle, a.idleWall, ns = time.Duration(ns[0]), time.Unix(0, ns[1]), ns[2:]
	}
	a.lifetime, a.wall = time.Duration(ns[0]), time.Unix(0, ns[1])
	return a, nil
}

// initChecked caches checkInitELF's answer by path and architecture.
var initChecked sync.Map // string -> initCheck

type initCheck struct{ err error }

// initBinary returns the host path of the binary mounted as the sandbox
// init: InitEnv, or this process's executable. It must be a static ELF
// executable for the daemon's architecture (arch as docker info reports it),
// or nothing is created: a dynamic one would need the image's loader and
// libraries, and an image without them would get no init, so no lifetime.
func initBinary(arch string) (string, error) {
	path, err := findInit()
	if err != nil {
		return "", err
	}
	key := path + "\x00" + arch
	c, ok := initChecked.Load(key)
	if !ok {
		c, _ = initChecked.LoadOrStore(key, initCheck{checkInitELF(path, arch)})
	}
	if err := c.(initCheck).err; err != nil {
		return "", err
	}
	return path, nil
}

func findInit() (string, error) {
	if p := os.Getenv(InitEnv); p != "" {
		if !filepath.IsAbs(p) {
			return "", initError(fmt.Sprintf("%s=%q is not an absolute path", InitEnv, p), nil)
		}
		return p, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", initError("the path of this process's executable is not known", err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return "", initError("the path of this process's executable cannot be resolved", err)
	}
	return exe, nil
}

// elfMachines maps docker info's Architecture to the ELF machine.
var elfMachines = map[string]elf.Machine{
	"x86_64": elf.EM_X86_64, "amd64": elf.EM_X86_64,
	"aarch64": elf.EM_AARCH64, "arm64": elf.EM_AARCH64,
	"s390x": elf.EM_S390, "ppc64le": elf.EM_PPC64, "riscv64": elf.EM_RISCV,
}

// checkInitELF refuses a binary that is not a static Linux ELF executable
// for arch: one with a program interpreter (PT_INTERP) is dynamic.
func checkInitELF(path, arch string) error {
	f, err := elf.Open(path)
	if err != nil {
		return initError(fmt.Sprintf("%s is not a Linux ELF executable", path), err)
	}
	defer f.Close()
	want, known := elfMachines[arch]
	switch {
	case !known:
		return initError(fmt.Sprintf("the Docker daemon's architecture %q is not one sandboxio knows", arch), nil)
	case f.Machine != want:
		return initError(fmt.Sprintf("%s is built for %s, the Docker daemon runs %s", path, f.Machine, arch), nil)
	case f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN:
		return initError(fmt.Sprintf("%s is not an executable (ELF type %s)", path, f.Type), nil)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return initError(fmt.Sprintf("%s is dynamically linked (it has a program interpreter), so it cannot run as the init of every image", path), nil)
		}
	}
	return nil
}

func initError(msg string, err error) error {
	fix := fmt.Sprintf("build sandboxio statically (CGO_ENABLED=0 go build), or set %s to the absolute path of a static sandboxio binary for linux/%s", InitEnv, runtime.GOARCH)
	return &model.Error{Class: model.ErrConfiguration, Attribute: "backend",
		Message: "the sandbox lifetime cannot be enforced: " + msg + "; it runs as PID 1 of every Docker sandbox", Fix: fix, Err: err}
}

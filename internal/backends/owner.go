package backends

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// The keys under which a sandbox records the process that created it (its
// owner): Docker labels; on Kubernetes LabelOwner is a label and the others
// are annotations. See docs/design/owner-liveness.md.
const (
	LabelOwner      = model.ReservedLabelPrefix + "owner"      // random, unique per process
	LabelOwnerPID   = model.ReservedLabelPrefix + "owner.pid"  // as the owner's own PID namespace numbers it
	LabelOwnerHost  = model.ReservedLabelPrefix + "owner.host" // for people: judges never trust it alone
	LabelOwnerBoot  = model.ReservedLabelPrefix + "owner.boot_id"
	LabelOwnerStart = model.ReservedLabelPrefix + "owner.start" // field 22 of /proc/self/stat
	// The owner's PID and time namespaces, "DEV:INODE" of /proc/self/ns/pid
	// and /proc/self/ns/time: a pid names a process only within its PID
	// namespace, and the time namespace offsets the start time read back.
	LabelOwnerPIDNS  = model.ReservedLabelPrefix + "owner.pidns"
	LabelOwnerTimeNS = model.ReservedLabelPrefix + "owner.timens"
	// A digest of /etc/machine-id (never the id itself) and the boot's
	// start (btime): what tells a reboot of this machine from another
	// machine, or another kernel on it, that shares the hostname.
	LabelOwnerMachine  = model.ReservedLabelPrefix + "owner.machine"
	LabelOwnerBootTime = model.ReservedLabelPrefix + "owner.boot_time"
)

// Owner identifies a process that creates sandboxes, so that another
// process can tell whether it is still alive. The process's own Owner
// (ProcessOwner) is also the judge of the others.
type Owner struct {
	ID, Host, Boot, Start, PIDNS, TimeNS, Machine, BootTime string
	PID                                                     int
	// procOwn: this process's /proc numbers processes in this process's
	// own PID namespace, so that a pid read in a label can be looked up in
	// it. Meaningful for the judge only.
	procOwn bool
}

// ProcessOwner is this process's identity, read once.
var ProcessOwner = sync.OnceValue(func() Owner {
	host, _ := os.Hostname()
	return Owner{
		ID:       RandomHex(8),
		PID:      os.Getpid(),
		Host:     host,
		Boot:     readTrim("/proc/sys/kernel/random/boot_id"),
		Start:    statStart("/proc/self/stat"),
		PIDNS:    nsID("/proc/self/ns/pid"),
		TimeNS:   nsID("/proc/self/ns/time"),
		Machine:  machineDigest(),
		BootTime: bootTime(),
		procOwn:  procIsOwn(),
	}
})

// Labels is the owner's record, keyed as above.
func (o Owner) Labels() map[string]string {
	return map[string]string{
		LabelOwner:         o.ID,
		LabelOwnerPID:      strconv.Itoa(o.PID),
		LabelOwnerHost:     o.Host,
		LabelOwnerBoot:     o.Boot,
		LabelOwnerStart:    o.Start,
		LabelOwnerPIDNS:    o.PIDNS,
		LabelOwnerTimeNS:   o.TimeNS,
		LabelOwnerMachine:  o.Machine,
		LabelOwnerBootTime: o.BootTime,
	}
}

// Verdict is a judge's answer about the owner a record names.
type Verdict struct {
	// Dead: the owner is verifiably gone. Anything the judge cannot
	// verify counts as alive.
	Dead bool
	// Why says how the judge decided, for messages.
	Why string
}

// Gone reports whether the owner that rec names is verifiably dead.
func (o Owner) Gone(rec map[string]string) bool { return o.Judge(rec).Dead }

// Judge decides whether the owner that rec (labels, as Labels writes them)
// names is dead. It is dead only when that is verifiable from here: the
// same boot and PID (and time) namespace as this process and no process of
// that pid, or one with another start time; or another boot of this very
// machine (same machine digest and hostname, and a boot that began before
// this one). Anything else counts as alive: another PID namespace (a
// container, unshare, systemd's PrivatePIDs), another machine or kernel,
// missing or unparsable labels, a /proc that cannot be read or that is not
// this namespace's, and this process itself.
func (o Owner) Judge(rec map[string]string) Verdict {
	alive := func(why string) Verdict { return Verdict{Why: why} }
	id := rec[LabelOwner]
	switch id {
	case "":
		return alive("it names no owner")
	case o.ID:
		return alive("its owner is this process")
	}
	pid, err := strconv.Atoi(rec[LabelOwnerPID])
	boot := rec[LabelOwnerBoot]
	if err != nil || pid <= 0 || boot == "" || o.Boot == "" {
		return alive("its owner labels are incomplete, so its owner cannot be judged")
	}
	if boot != o.Boot {
		if o.Machine != "" && rec[LabelOwnerMachine] == o.Machine && rec[LabelOwnerHost] == o.Host && bootBefore(rec[LabelOwnerBootTime], o.BootTime) {
			return Verdict{Dead: true, Why: "its owner ran in an earlier boot of this machine"}
		}
		return alive("its owner runs on another machine or kernel (another boot id), whose processes cannot be seen from here")
	}
	if rec[LabelOwnerPIDNS] == "" || o.PIDNS == "" || rec[LabelOwnerPIDNS] != o.PIDNS {
		return alive("its owner runs in another PID namespace than this process, so its liveness cannot be verified from here")
	}
	if rec[LabelOwnerTimeNS] != o.TimeNS || rec[LabelOwnerStart] == "" {
		return alive("its owner's start time cannot be compared from here")
	}
	if !o.procOwn {
		return alive("this process's /proc is not its own PID namespace's, so its owner cannot be looked up")
	}
	switch start, state := procState(pid); state {
	case procGone:
		return Verdict{Dead: true, Why: "its owner process is gone"}
	case procPresent:
		if start != rec[LabelOwnerStart] {
			return Verdict{Dead: true, Why: "its owner process is gone (its pid is another process's now)"}
		}
		return alive("its owner process is alive")
	}
	return alive("its owner process cannot be looked up from here")
}

// Describe names the owner that rec records, for messages: its id, pid,
// host and PID namespace.
func Describe(rec map[string]string) string {
	or := func(s string) string {
		if s == "" {
			return "unknown"
		}
		return s
	}
	return fmt.Sprintf("owner %s (pid %s on host %s, PID namespace %s)",
		or(rec[LabelOwner]), or(rec[LabelOwnerPID]), or(rec[LabelOwnerHost]), or(rec[LabelOwnerPIDNS]))
}

// bootBefore reports whether boot time a (seconds since the epoch) is
// earlier than b; false when either cannot be read.
func bootBefore(a, b string) bool {
	x, err1 := strconv.ParseInt(a, 10, 64)
	y, err2 := strconv.ParseInt(b, 10, 64)
	return err1 == nil && err2 == nil && x > 0 && x < y
}

type procLookup int

const (
	procUnknown procLookup = iota
	procGone
	procPresent
)

// statStart returns the start time (field 22, clock ticks since boot) in
// a /proc/PID/stat file, or "".
func statStart(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	// The command name (field 2) may hold spaces and parentheses; the
	// fields after it start after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	const startField = 22 - 3 // f[0] is field 3
	if len(f) <= startField {
		return ""
	}
	if _, err := strconv.ParseUint(f[startField], 10, 64); err != nil {
		return ""
	}
	return f[startField]
}

// procIsOwn reports whether /proc numbers processes in this process's PID
// namespace: /proc/self/status lists this process's pid in every namespace
// from /proc's down to its own (NSpid), so a single entry, equal to
// getpid, means they are the same. (Without NSpid, before Linux 4.1, it
// cannot be told: false.)
func procIsOwn() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "NSpid:"); ok {
			f := strings.Fields(rest)
			return len(f) == 1 && f[0] == strconv.Itoa(os.Getpid())
		}
	}
	return false
}

func machineDigest() string {
	for _, p := range []string{"/etc/machine-id", "/var/lib/dbus/machine-id"} {
		if id := readTrim(p); id != "" {
			sum := sha256.Sum256([]byte("sandboxio owner machine v1\x00" + id))
			return hex.EncodeToString(sum[:16])
		}
	}
	return ""
}

func bootTime() string {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "btime "); ok {
			if _, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64); err == nil {
				return strings.TrimSpace(rest)
			}
		}
	}
	return ""
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// RandomHex returns n random bytes in hex.
func RandomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand: " + err.Error()) // never fails on Linux
	}
	return hex.EncodeToString(b)
}

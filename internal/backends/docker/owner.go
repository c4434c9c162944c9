package docker

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Labels this backend sets under the reserved prefix, besides the tenant,
// session, template and managed labels that model defines.
const (
	labelExpires    = model.ReservedLabelPrefix + "expires"
	labelOwner      = model.ReservedLabelPrefix + "owner"
	labelOwnerPID   = model.ReservedLabelPrefix + "owner.pid"
	labelOwnerHost  = model.ReservedLabelPrefix + "owner.host"
	labelOwnerBoot  = model.ReservedLabelPrefix + "owner.boot_id"
	labelOwnerStart = model.ReservedLabelPrefix + "owner.start"
	labelRuntime    = model.ReservedLabelPrefix + "runtime"
	labelTier       = model.ReservedLabelPrefix + "tier"
	labelDiskCap    = model.ReservedLabelPrefix + "disk_cap"
	labelPidsCap    = model.ReservedLabelPrefix + "pids_cap"
	labelProbe      = model.ReservedLabelPrefix + "probe"
)

// owner identifies the process that created a sandbox, so that a reaper can
// tell whether it is still alive. The pid alone is not enough: pids are
// reused, so the process start time and the boot id travel with it.
type owner struct {
	ID    string // random, unique per process
	PID   int
	Host  string
	Boot  string
	Start string
}

var processOwner = sync.OnceValue(func() owner {
	host, _ := os.Hostname()
	return owner{
		ID:    randomHex(8),
		PID:   os.Getpid(),
		Host:  host,
		Boot:  bootID(),
		Start: procStart(os.Getpid()),
	}
})

func (o owner) labels() map[string]string {
	return map[string]string{
		labelOwner:      o.ID,
		labelOwnerPID:   strconv.Itoa(o.PID),
		labelOwnerHost:  o.Host,
		labelOwnerBoot:  o.Boot,
		labelOwnerStart: o.Start,
	}
}

// ownerGone reports whether the owner named by a container's labels is
// certainly dead. Only an owner on this host can be judged; for any other,
// or when the labels are incomplete, it answers false and the lifetime label
// decides.
func ownerGone(labels map[string]string, self owner) bool {
	pid, err := strconv.Atoi(labels[labelOwnerPID])
	if err != nil || pid <= 0 || labels[labelOwnerHost] == "" || labels[labelOwnerHost] != self.Host {
		return false
	}
	if labels[labelOwner] == self.ID {
		return false
	}
	if boot := labels[labelOwnerBoot]; boot != "" && self.Boot != "" && boot != self.Boot {
		return true // the machine rebooted since: every process of that boot is gone
	}
	start := procStart(pid)
	if start == "" {
		return true // no such process
	}
	// Same pid, different start time: the pid was reused by another process.
	return labels[labelOwnerStart] != "" && start != labels[labelOwnerStart]
}

func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// procStart returns a process's start time (field 22 of /proc/<pid>/stat, in
// clock ticks since boot), or "" when there is no such process.
func procStart(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command name (field 2) may contain spaces and parentheses; the
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
	return f[startField]
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand: " + err.Error()) // never fails on Linux
	}
	return hex.EncodeToString(b)
}

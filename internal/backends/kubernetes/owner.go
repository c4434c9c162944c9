package kubernetes

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"sync"
)

// owner identifies the process that created a pod, so that `sandboxio reap`
// on the same host can tell whether it is still alive (pid, its start time
// and the boot id; pids are reused). Owners on other hosts are judged by
// the lifetime only.
type owner struct {
	ID, Host, Boot, Start string
	PID                   int
}

var processOwner = sync.OnceValue(func() owner {
	host, _ := os.Hostname()
	return owner{ID: randomHex(8), PID: os.Getpid(), Host: host, Boot: bootID(), Start: procStart(os.Getpid())}
})

func (o owner) annotations() map[string]string {
	return map[string]string{annOwnerPID: strconv.Itoa(o.PID), annOwnerHost: o.Host, annOwnerBoot: o.Boot, annOwnerTime: o.Start}
}

// ownerGone reports whether the owner named by a pod's annotations is
// certainly dead; false when it cannot be judged from here.
func ownerGone(ann, lbl map[string]string, self owner) bool {
	pid, err := strconv.Atoi(ann[annOwnerPID])
	if err != nil || pid <= 0 || ann[annOwnerHost] == "" || ann[annOwnerHost] != self.Host || lbl[labelOwner] == self.ID {
		return false
	}
	if boot := ann[annOwnerBoot]; boot != "" && self.Boot != "" && boot != self.Boot {
		return true
	}
	start := procStart(pid)
	if start == "" {
		return true
	}
	return ann[annOwnerTime] != "" && start != ann[annOwnerTime]
}

func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// procStart is field 22 of /proc/PID/stat, or "" when there is no such
// process.
func procStart(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) <= 22-3 {
		return ""
	}
	return f[22-3]
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	return hex.EncodeToString(b)
}

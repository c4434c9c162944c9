package docker

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// hostPids watches the host pids cgroup of a gVisor sandbox, whose limit is
// the backstop (runscPidsBackstop). A refusal there kills the whole sandbox,
// and the runtime removes the cgroup (and its pids.events count) soon after,
// with no file notification on cgroup v1; so the count is sampled while the
// sandbox lives, faster near the limit. See docs/design/gvisor-pids-backstop.md.
type hostPids struct {
	dir   string // the cgroup directory on this host
	limit int64  // its pids.max

	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	base    int64 // the "max" count when the watch began
	refused int64 // the latest "max" count read, minus base
	ended   bool
}

const (
	hostPidsIdleEvery = 100 * time.Millisecond
	hostPidsNearEvery = 2 * time.Millisecond
)

// watchHostPids finds the pids cgroup of the container's process pid (its
// State.Pid) and, with sample (gVisor), watches it; without (runc), whose
// cgroup lives as long as the container, it is read when asked. It fails where this process cannot see the
// container's host cgroup: a daemon on another host or in another PID or
// mount namespace, a cgroup without a pids limit, or one that is not the
// container's (the directory must be named after the container id, so a
// recycled pid is not taken for it).
func watchHostPids(pid int, id string, sample bool) (*hostPids, error) {
	if pid <= 0 || id == "" {
		return nil, fmt.Errorf("no host process")
	}
	procCgroup, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return nil, err
	}
	mountinfo, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	dir, err := pidsCgroupDir(procCgroup, mountinfo)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(filepath.Base(dir), id) {
		return nil, fmt.Errorf("process %d is in pids cgroup %s, not the container's", pid, dir)
	}
	limit, err := readInt(filepath.Join(dir, "pids.max"))
	if err != nil {
		return nil, fmt.Errorf("pids.max of %s: %w", dir, err)
	}
	base, err := readPidsMaxEvents(dir)
	if err != nil {
		return nil, err
	}
	h := &hostPids{dir: dir, limit: limit, base: base, stop: make(chan struct{}), done: make(chan struct{})}
	if sample {
		go h.loop()
	} else {
		close(h.done)
	}
	return h, nil
}

func (h *hostPids) loop() {
	defer close(h.done)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			h.sample()
			return
		case <-t.C:
		}
		cur, ok := h.sample()
		if !ok {
			return // the cgroup is gone: so is the container
		}
		every := hostPidsIdleEvery
		if cur >= h.limit-h.limit/8 {
			every = hostPidsNearEvery
		}
		t.Reset(every)
	}
}

// sample reads the refusal count and the current number of tasks; ok is
// false once the cgroup cannot be read any more.
func (h *hostPids) sample() (current int64, ok bool) {
	n, err := readPidsMaxEvents(h.dir)
	if err != nil {
		h.mu.Lock()
		h.ended = true
		h.mu.Unlock()
		return 0, false
	}
	h.mu.Lock()
	h.refused = max(h.refused, n-h.base)
	h.mu.Unlock()
	cur, err := readInt(filepath.Join(h.dir, "pids.current"))
	return cur, err == nil
}

// refusals stops the watch, with a last read if the cgroup is still there,
// and returns how many forks the host refused the sandbox since it began.
func (h *hostPids) refusals() int64 {
	h.close()
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.refused
}

func (h *hostPids) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.stop:
	default:
		close(h.stop)
	}
}

// attachHostPids finds a sandbox's host pids cgroup, and under gVisor
// starts its watch. Where it cannot (see watchHostPids) the sandbox has
// none, and a death at the gVisor backstop is told by weaker evidence (see
// died).
func (b *dockerBackend) attachHostPids(ctx context.Context, s *sandbox) {
	ins, err := b.cli.ContainerInspect(ctx, s.id)
	if err != nil || ins.State == nil {
		tracef("host pids cgroup of %s not watched: inspect: %v", short(s.id), err)
		return
	}
	h, err := watchHostPids(ins.State.Pid, s.id, s.tier == model.TierGVisor)
	if err != nil {
		tracef("host pids cgroup of %s not watched: %v", short(s.id), err)
		return
	}
	s.hostPids = h
}

// pidsCgroupDir finds, from a process's /proc/PID/cgroup and this
// process's mountinfo, the directory of the process's pids cgroup: the
// cgroup v1 pids hierarchy where there is one, else the unified (v2) one.
func pidsCgroupDir(procCgroup, mountinfo []byte) (string, error) {
	var v1, v2 string
	var haveV1, haveV2 bool
	for _, line := range strings.Split(string(procCgroup), "\n") {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2, haveV2 = parts[2], true
		case hasField(parts[1], "pids"):
			v1, haveV1 = parts[2], true
		}
	}
	for _, line := range strings.Split(string(mountinfo), "\n") {
		// id parent major:minor root mount-point options [optional...] - fstype source super-options
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		root, point := unescapeMount(f[3]), unescapeMount(f[4])
		switch {
		case haveV1 && g[0] == "cgroup" && hasField(g[2], "pids"):
			return below(point, root, v1)
		case haveV2 && !haveV1 && g[0] == "cgroup2":
			return below(point, root, v2)
		}
	}
	return "", fmt.Errorf("no pids cgroup hierarchy mounted here for the process")
}

// hasField reports whether a comma-separated list holds name.
func hasField(list, name string) bool { return strings.Contains(","+list+",", ","+name+",") }

// below joins a cgroup path to the mount point of its hierarchy, whose root
// (the mount's root within the hierarchy) must be a prefix of the path; the
// result stays below the mount point.
func below(point, root, path string) (string, error) {
	rel, ok := strings.CutPrefix(path, root)
	if root == "/" {
		rel, ok = path, strings.HasPrefix(path, "/")
	}
	dir := filepath.Join(point, rel)
	if !ok || !filepath.IsAbs(point) || (rel != "" && !strings.HasPrefix(rel, "/")) || slices.Contains(strings.Split(rel, "/"), "..") {
		return "", fmt.Errorf("cgroup %s is not below the mount of %s at %s", path, root, point)
	}
	return dir, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
}

// readPidsMaxEvents reads the "max" count of a pids cgroup's pids.events:
// forks refused because this cgroup was at its limit.
func readPidsMaxEvents(dir string) (int64, error) {
	f, err := os.Open(filepath.Join(dir, "pids.events"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok && k == "max" {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s/pids.events has no max count", dir)
}

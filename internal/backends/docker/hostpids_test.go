package docker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	mountsV1 = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	mountsV2 = `30 23 0:27 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate
`
)

// pidsCgroupDir finds a process's pids cgroup from /proc/PID/cgroup and the
// mount table: cgroup v1 (cgroupfs and systemd drivers), v2, a hierarchy
// mounted from below its root, an escaped mount point; and refuses what it
// cannot place.
func TestPidsCgroupDir(t *testing.T) {
	for name, c := range map[string]struct{ cgroup, mounts, want string }{
		"v1 cgroupfs":                 {"8:pids:/docker/abc\n4:memory:/docker/abc\n0::/\n", mountsV1, "/sys/fs/cgroup/pids/docker/abc"},
		"v1 systemd":                  {"8:pids:/system.slice/docker-abc.scope\n", mountsV1, "/sys/fs/cgroup/pids/system.slice/docker-abc.scope"},
		"v1 joint":                    {"5:cpu,pids:/docker/abc\n", "39 31 0:36 / /sys/fs/cgroup/cpu,pids rw - cgroup cgroup rw,cpu,pids\n", "/sys/fs/cgroup/cpu,pids/docker/abc"},
		"v2":                          {"0::/system.slice/docker-abc.scope\n", mountsV2, "/sys/fs/cgroup/system.slice/docker-abc.scope"},
		"mounted from below its root": {"0::/docker/abc\n", "30 23 0:27 /docker /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", "/sys/fs/cgroup/abc"},
		"escaped mount point":         {"8:pids:/docker/abc\n", `39 31 0:36 / /mnt/cg\040pids rw - cgroup cgroup rw,pids` + "\n", "/mnt/cg pids/docker/abc"},
		"pidsx is not pids":           {"8:pidsx:/docker/abc\n", mountsV1, ""},
		"no pids hierarchy mounted":   {"8:pids:/docker/abc\n", mountsV2, ""},
		"outside the mount's root":    {"0::/other/abc\n", "30 23 0:27 /docker /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", ""},
		"a path that climbs":          {"8:pids:/docker/../../etc\n", mountsV1, ""},
		"empty":                       {"", "", ""},
	} {
		got, err := pidsCgroupDir([]byte(c.cgroup), []byte(c.mounts))
		if got != c.want || (err == nil) != (c.want != "") {
			t.Errorf("%s: %q, %v; want %q", name, got, err, c.want)
		}
	}
}

// FuzzPidsCgroupDir: any input, no panic; a directory found is clean and
// below a mount point the table names.
func FuzzPidsCgroupDir(f *testing.F) {
	f.Add([]byte("8:pids:/docker/abc\n0::/\n"), []byte(mountsV1))
	f.Add([]byte("0::/a/b\n"), []byte(mountsV2))
	f.Add([]byte("0::/a/../..\n"), []byte(`1 2 3:4 /a\ /x\0 rw - cgroup2 c rw`))
	f.Fuzz(func(t *testing.T, cgroup, mounts []byte) {
		dir, err := pidsCgroupDir(cgroup, mounts)
		if err != nil {
			return
		}
		if dir != filepath.Clean(dir) || !filepath.IsAbs(dir) {
			t.Fatalf("directory %q", dir)
		}
	})
}

// The watch reads a cgroup's refusals from pids.events, counts only those
// after it began, and keeps the count once the cgroup is gone.
func TestHostPidsCountsRefusalsUntilTheCgroupGoes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "docker-abc")
	// Written whole, by rename, as cgroupfs shows them: a watcher reading
	// a file mid-write saw it empty, took the cgroup for gone and stopped
	// counting (this test's failure under load in CI).
	write := func(name, s string) {
		t.Helper()
		tmp := filepath.Join(dir, "."+name)
		if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write("pids.max", "1152\n")
	write("pids.current", "55\n")
	write("pids.events", "max 3\n")
	base, _ := readPidsMaxEvents(dir)
	h := &hostPids{dir: dir, limit: 1152, base: base, stop: make(chan struct{}), done: make(chan struct{})}
	go h.loop()
	write("pids.current", "1152\n") // near the limit: sampled every 2 ms
	write("pids.events", "max 5\n")
	for i := 0; i < 500; i++ {
		h.mu.Lock()
		n := h.refused
		h.mu.Unlock()
		if n == 2 {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	<-h.done // ends by itself once the cgroup is gone
	if n := h.refusals(); n != 2 {
		t.Fatalf("%d refusals, want 2 (5 less the 3 before the watch)", n)
	}
	if _, err := readPidsMaxEvents(t.TempDir()); err == nil || !strings.Contains(err.Error(), "pids.events") {
		t.Fatalf("no pids.events: %v", err)
	}
}

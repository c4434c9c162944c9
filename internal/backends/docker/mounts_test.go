package docker

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// fillScript writes $1 MiB into every writable mount the sandbox has, as
// /proc/mounts lists them inside (whatever sandboxio meant to mount), and
// keeps each file so that all are full at once. One line per mount:
// "MOUNT EXIT BYTES".
const fillScript = `n=$1
for m in $(awk '$4 ~ /^rw(,|$)/ && $3 != "proc" && $3 != "sysfs" && $3 != "cgroup" && $3 != "cgroup2" && $3 != "devpts" {print $2}' /proc/mounts | sort -u); do
  f=$m/.sandboxio-fill
  dd if=/dev/zero of=$f bs=1M count=$n >/dev/null 2>&1
  rc=$?
  sz=0
  [ -f $f ] && sz=$(wc -c <$f)
  echo "$m $rc $sz"
done`

// With disk_mb = 16, writing 32 MiB into each writable mount fails in every
// one of them (no space left, or read-only), and what they hold together
// stays within disk_mb: /dev and /dev/shm (Docker's 64 MB tmpfs mounts)
// are no way around the cap. Under gVisor, /dev takes no size (see devNote):
// there, and only there, the write goes through, charged to memory_mb (see
// TestGVisorDevIsBoundedByMemory).
func TestEveryWritableMountIsBoundedByDisk(t *testing.T) {
	const diskMB = 16
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) {
			needRuntime(t, rt)
			t.Parallel()
			sb := open(t, newTestBackend(t, WithDiskStrategy(DiskTmpfs)), testSpec(t, withRuntime(rt), func(s *model.Spec) { s.Resources.DiskMB = diskMB }))
			t.Logf("strategy: %s", sb.Info().DiskCapStrategy)
			if !strings.Contains(sb.Info().DiskCapStrategy, "/dev/shm=") {
				t.Fatalf("the strategy does not name /dev/shm's size: %s", sb.Info().DiskCapStrategy)
			}
			res, err := sb.Run(t.Context(), []string{"sh", "-c", fillScript, "fill", strconv.Itoa(diskMB + 16)}, backends.RunOptions{Timeout: 50 * time.Second})
			if err != nil {
				t.Fatalf("fill: %v", err)
			}
			var total int64
			seen := map[string]bool{}
			for _, line := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
				f := strings.Fields(line)
				if len(f) != 3 {
					t.Fatalf("fill output %q\nstderr %s", res.Stdout, res.Stderr)
				}
				m, rc := f[0], f[1]
				n, _ := strconv.ParseInt(f[2], 10, 64)
				seen[m] = true
				t.Logf("%-14s exit %s, %d bytes", m, rc, n)
				if rt == "runsc" && m == "/dev" {
					// gVisor: bounded by memory_mb, not disk_mb.
					continue
				}
				if rc == "0" {
					t.Errorf("%s took %d MiB with disk_mb = %d", m, diskMB+16, diskMB)
				}
				total += n
			}
			for _, m := range []string{"/tmp", "/work", "/dev/shm"} {
				if !seen[m] {
					t.Errorf("%s is not among the writable mounts: %q", m, res.Stdout)
				}
			}
			if total > diskMB<<20 {
				t.Fatalf("the writable mounts hold %d bytes together, more than disk_mb = %d MiB", total, diskMB)
			}
			if total < (diskMB-1)<<20 {
				t.Fatalf("the writable mounts hold only %d bytes together, want about disk_mb = %d MiB", total, diskMB)
			}
			// The device nodes still work in a read-only /dev.
			sh(t, sb, "echo x >/dev/null && head -c 4 /dev/urandom | wc -c")
			// Their sizes, as df reports them, add up to the cap.
			df := sh(t, sb, "df -k /tmp /work /var/tmp /root /home /dev/shm | awk 'NR>1 {s+=$2} END {print s}'")
			if df != strconv.Itoa(diskMB*1024) {
				t.Fatalf("df: the sized mounts add up to %s KiB, want %d", df, diskMB*1024)
			}
		})
	}
}

// Under gVisor /dev cannot be sized or made read-only (its /dev ignores the
// size, and a read-only one refuses `>/dev/null`), so what is written there
// lives in the sandbox's memory: past memory_mb the sandbox is killed and
// the command gets ResourceLimitExceeded(memory).
func TestGVisorDevIsBoundedByMemory(t *testing.T) {
	needRuntime(t, "runsc")
	const memMB = 128
	sb := open(t, newTestBackend(t), testSpec(t, withRuntime("runsc"), func(s *model.Spec) { s.Resources.MemoryMB = memMB }))
	if !strings.Contains(sb.Info().DiskCapStrategy, "charged to memory_mb") {
		t.Fatalf("the strategy does not say where /dev is charged: %s", sb.Info().DiskCapStrategy)
	}
	_, err := sb.Run(t.Context(), []string{"dd", "if=/dev/zero", "of=/dev/fill", "bs=1M", "count=" + strconv.Itoa(memMB+16)}, backends.RunOptions{Timeout: 50 * time.Second})
	wantClass(t, err, model.ErrResourceLimitExceeded, model.LimitMemory)
}

package nsthread_test

import (
	"os"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/nsthread"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/testing/netns"
)

func netnsOf(path string) (uint64, error) {
	var st unix.Stat_t
	err := unix.Stat(path, &st)
	return st.Ino, err
}

// The thread that ran in the namespace lives on, back in this process's
// namespace: ending it would kill every child it started with a
// parent-death signal (the Terraform CLI under terraform-exec).
func TestRunReturnsTheThread(t *testing.T) {
	lab := netns.New(t)
	ours, err := netnsOf("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	var tid int
	var inside uint64
	if err := nsthread.Run(lab.SandboxFD, func() (err error) {
		tid = unix.Gettid()
		inside, err = netnsOf("/proc/thread-self/ns/net")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if inside == ours {
		t.Fatal("f ran in this process's namespace, not the lab's")
	}
	task := "/proc/self/task/" + strconv.Itoa(tid)
	// A discarded thread ends as its goroutine does; give it the time.
	time.Sleep(200 * time.Millisecond)
	if _, err := os.Stat(task); err != nil {
		t.Fatalf("the thread %d that ran in the namespace ended: %v", tid, err)
	}
	now, err := netnsOf(task + "/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	if now != ours {
		t.Fatalf("the thread %d stayed in the lab's namespace", tid)
	}
}

func TestRunRefusesABadNamespace(t *testing.T) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := nsthread.Run(int(f.Fd()), func() error {
		t.Error("f ran")
		return nil
	}); err == nil {
		t.Fatal("Run with a file that is no namespace succeeded")
	}
}

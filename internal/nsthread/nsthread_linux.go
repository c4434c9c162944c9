// Package nsthread runs a function on an OS thread moved into another
// network namespace, and moves the thread back before the runtime may use
// it again.
//
// The thread is returned rather than discarded because a thread's end is
// its children's parent death on Linux: a child started from it with
// Pdeathsig (terraform-exec starts the Terraform CLI so) is killed when the
// thread ends, long before this process does.
package nsthread

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// Run runs f on an OS thread in the network namespace fd and waits for it.
// Sockets f creates stay in that namespace and may be used from any
// goroutine. The thread goes back to its own namespace after f; only if
// that fails is it discarded (it then stays locked, and the runtime ends it
// with the goroutine rather than run anything else in the namespace).
func Run(fd int, f func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- fmt.Errorf("nsthread: this thread's namespace: %w", err)
			return
		}
		defer unix.Close(home)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread() // unchanged: setns moves all or nothing
			ch <- fmt.Errorf("nsthread: setns: %w", err)
			return
		}
		err = f()
		if unix.Setns(home, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		ch <- err
	}()
	return <-ch
}

// Package nodump keeps a process that holds secret values out of core dumps
// and out of reach of its own user's other processes: the CLI (run,
// run-code, mcp) and the Docker backend's watcher call Apply first thing.
//
// On Linux it sets RLIMIT_CORE to 0 (soft and hard, so the process cannot
// raise it again and its children start with it) and clears the dumpable
// flag (PR_SET_DUMPABLE 0). A non-dumpable process writes no core dump
// whatever core_pattern says (a pipe to a crash collector included, which
// RLIMIT_CORE alone does not stop), cannot be ptrace-attached by another
// process of the same user, and its /proc/PID files (environ, mem, maps,
// fd) belong to root, so the same user cannot read them. The process itself
// keeps its own /proc/self (the kernel lets a task look at itself), so
// os.Executable and re-executing /proc/self/exe still work. execve resets
// the flag, which is why every entry point calls Apply again. Elsewhere it
// does nothing.
package nodump

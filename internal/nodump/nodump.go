// Package nodump keeps a process that holds secret values out of core dumps
// and out of reach of its own user's other processes: the CLI (run, run-code,
// mcp) and the Docker watcher call Apply first thing. On Linux it sets
// RLIMIT_CORE to 0 and clears the dumpable flag; execve resets the flag, so
// every entry point calls Apply again. Elsewhere it does nothing.
// See docs/design/no-core-dumps.md.
package nodump

// Command sandboxio is the sandboxio CLI: `policy check` and `policy test`
// for CI and security reviewers, `version`, and the run-time helper's
// commands (`run`, `run-code`, `reap`, `image prepare`, `mcp`).
//
// Every command lives in its own file and adds itself to the command table
// from an init function (see register): its name, a short help, an example
// and a setup function that declares its flags and returns what runs it.
// cli.go builds the cobra command tree from the table on every run
// (docs/design/cli-cobra.md).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/nodump"
)

// Exit codes, the same for every command.
const (
	exitOK     = 0 // clean: nothing refused
	exitDenied = 1 // a policy refused (or a test failed)
	exitUsage  = 2 // usage or input error: bad flags, unreadable or malformed input
)

// exitCodesHelp ends every command's help text, unless the command has its
// own (command.exitCodes).
const exitCodesHelp = `Exit codes:
  0  clean: nothing refused
  1  denied: a policy refused (policy check), a test failed (policy test)
  2  usage or input error: bad flags or arguments, unreadable or malformed input, policies that do not load`

// overviewExitCodesHelp ends the command list.
const overviewExitCodesHelp = exitCodesHelp + `
policy check exits 3 with --fail-on-deferred when nothing is refused but something is
checked only at apply. run and run-code pass the sandboxed command's exit code through; their own refusals,
timeouts and exceeded caps exit 64-72, one code per error class (see sandboxio run --help).`

// env is what a command may touch, so tests can run commands in-process.
type env struct {
	stdout, stderr io.Writer
	stdin          io.Reader
	now            func() time.Time
	// reexec lets run and run-code replace the process with a new image of
	// the CLI to drop secrets from its environment (see scrubSecrets); only
	// the real process does, never a test running commands in-process.
	reexec bool
}

// runFunc runs a command with its positional arguments (flags already
// parsed) and returns the exit code.
type runFunc func(ctx context.Context, e *env, args []string) int

// command is one entry of the command table.
type command struct {
	name    string // the words that select it: "policy check"
	summary string // one line for the command list
	usage   string // synopsis after "sandboxio"
	help    string // what it does, in a few lines; the guide has the rest
	example string // an example or two, shell lines
	// setup declares the command's flags on fs and returns its runner.
	setup func(fs *pflag.FlagSet) runFunc
	// hidden commands are left out of the command list (tools for the build).
	hidden bool
	// exitCodes replaces exitCodesHelp at the end of the command's help.
	exitCodes string
	// briefFlagsOf names the command whose shared flags (see sharedFlag)
	// this command's help lists by name only, to fit a screen.
	briefFlagsOf string
}

var commands = map[string]*command{}

// register adds a command to the table; each command's file calls it from
// init. A duplicate name is a programming error.
func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("sandboxio: command registered twice: " + c.name)
	}
	commands[c.name] = c
}

// version is set at build time: -ldflags "-X main.version=1.2.3".
var version = "dev"

// main runs after every package's init, so the processes that the Docker
// backend starts from this binary (the sandbox's PID 1 init, the owner's
// watcher, the backstop) have been taken over there, before any argument
// is parsed here.
func main() {
	protect()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], &env{stdout: os.Stdout, stderr: os.Stderr, stdin: os.Stdin, now: time.Now, reexec: true})
	stop()
	os.Exit(code)
}

// protect keeps the process, which may hold secret values (run, run-code,
// mcp), out of core dumps and its /proc files from its user's other
// processes, before anything is read. It cannot fail on Linux; if it ever
// does, the CLI does not run unprotected.
func protect() {
	if err := nodump.Apply(); err != nil {
		fmt.Fprintf(os.Stderr, "sandboxio: %v: not running, since this process may hold secret values and could not be kept out of core dumps\n", err)
		os.Exit(exitUsage)
	}
}

// stringsFlag is a repeatable string flag (--policy a --policy b).
type stringsFlag []string

func (s *stringsFlag) String() string { return strings.Join(*s, ",") }

func (s *stringsFlag) Type() string { return "strings" }

func (s *stringsFlag) Set(v string) error {
	if v == "" {
		return errors.New("empty value")
	}
	*s = append(*s, v)
	return nil
}

// choiceFlag is a string flag limited to some values.
type choiceFlag struct {
	value   string
	choices []string
}

func (c *choiceFlag) String() string { return c.value }

func (c *choiceFlag) Type() string { return "string" }

func (c *choiceFlag) Set(v string) error {
	for _, x := range c.choices {
		if v == x {
			c.value = v
			return nil
		}
	}
	return fmt.Errorf("%q is not one of %s", v, strings.Join(c.choices, ", "))
}

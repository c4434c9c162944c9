// Command sandboxio is the sandboxio CLI: `policy check` and `policy test`
// for CI and security reviewers, `version`, and the run-time helper's
// commands (`run`, `run-code`, `reap`, `image prepare`).
//
// Every command lives in its own file and adds itself to the command table
// from an init function (see register), so a new command (run, run-code,
// reap) is one new file: a command value with its name, help text and a
// setup function that declares its flags and returns what runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

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
	help    string // what it does, its arguments and output
	// setup declares the command's flags on fs and returns its runner.
	setup func(fs *flag.FlagSet) runFunc
	// hidden commands are left out of the command list (tools for the build).
	hidden bool
	// exitCodes replaces exitCodesHelp at the end of the command's help.
	exitCodes string
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

// run dispatches to the command whose name is the longest run of leading
// words in args.
func run(ctx context.Context, args []string, e *env) int {
	if len(args) == 0 {
		writeOverview(e.stderr, "")
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		if len(args) > 1 && args[0] == "help" {
			return run(ctx, append(args[1:], "--help"), e)
		}
		writeOverview(e.stdout, "")
		return exitOK
	case "-v", "--version":
		args = append([]string{"version"}, args[1:]...)
	}
	var cmd *command
	n := 0
	for i := 1; i <= len(args); i++ {
		if c, ok := commands[strings.Join(args[:i], " ")]; ok {
			cmd, n = c, i
		}
	}
	if cmd == nil {
		return unknown(e, args)
	}
	return cmd.execute(ctx, e, args[n:])
}

// unknown answers args that name no command: the list of a group
// ("sandboxio policy", "sandboxio policy --help") or an error.
func unknown(e *env, args []string) int {
	words := leadingWords(args)
	group := ""
	for i := len(words); i > 0; i-- {
		if g := strings.Join(words[:i], " "); isGroup(g) {
			group = g
			if i == len(words) && len(args) > i && isHelp(args[i]) {
				writeOverview(e.stdout, group)
				return exitOK
			}
			if i < len(words) {
				fmt.Fprintf(e.stderr, "sandboxio: unknown command %q\n\n", strings.Join(words[:i+1], " "))
			}
			break
		}
	}
	if group != "" {
		writeOverview(e.stderr, group)
		return exitUsage
	}
	fmt.Fprintf(e.stderr, "sandboxio: unknown command %q; run `sandboxio --help` for the list\n", strings.Join(args[:min(len(args), 2)], " "))
	return exitUsage
}

func (c *command) execute(ctx context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("sandboxio "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	runner := c.setup(fs)
	positional, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		c.writeHelp(e.stdout, fs)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "sandboxio %s: %v\nusage: sandboxio %s\nrun `sandboxio %s --help` for details\n", c.name, err, c.usage, c.name)
		return exitUsage
	}
	return runner(ctx, e, positional)
}

// parseInterleaved lets flags follow positional arguments
// (`policy check plan.json --format sarif`), which the flag package alone
// does not; "--" ends the flags.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		// fs.Parse stops at the first non-flag or after "--".
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

func (c *command) writeHelp(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: sandboxio %s\n\n%s\n", c.usage, strings.TrimSpace(c.help))
	var flags strings.Builder
	fs.SetOutput(&flags)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	if flags.Len() > 0 {
		fmt.Fprintf(w, "\nFlags (-flag and --flag are the same):\n%s", flags.String())
	}
	codes := exitCodesHelp
	if c.exitCodes != "" {
		codes = c.exitCodes
	}
	fmt.Fprintf(w, "\n%s\n", codes)
}

func leadingWords(args []string) []string {
	var words []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			break
		}
		words = append(words, a)
	}
	return words
}

func isHelp(a string) bool { return a == "-h" || a == "-help" || a == "--help" }

// isGroup reports whether prefix is the first word(s) of some commands.
func isGroup(prefix string) bool {
	if prefix == "" {
		return false
	}
	for name := range commands {
		if strings.HasPrefix(name, prefix+" ") {
			return true
		}
	}
	return false
}

// writeOverview lists the commands (under group, if set).
func writeOverview(w io.Writer, group string) {
	names := make([]string, 0, len(commands))
	for name, c := range commands {
		if !c.hidden && (group == "" || strings.HasPrefix(name, group+" ")) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	if group == "" {
		fmt.Fprintf(w, "sandboxio: policy-as-code for code-execution sandboxes.\n\nusage: sandboxio COMMAND [flags] [args]\n\nCommands:\n")
	} else {
		fmt.Fprintf(w, "usage: sandboxio %s COMMAND [flags] [args]\n\nCommands:\n", group)
	}
	for _, name := range names {
		fmt.Fprintf(w, "  %-14s %s\n", name, commands[name].summary)
	}
	fmt.Fprintf(w, "\nRun `sandboxio COMMAND --help` for a command's flags.\n\n%s\n", overviewExitCodesHelp)
}

// stringsFlag is a repeatable string flag (--policy a --policy b).
type stringsFlag []string

func (s *stringsFlag) String() string { return strings.Join(*s, ",") }

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

func (c *choiceFlag) Set(v string) error {
	for _, x := range c.choices {
		if v == x {
			c.value = v
			return nil
		}
	}
	return fmt.Errorf("%q is not one of %s", v, strings.Join(c.choices, ", "))
}

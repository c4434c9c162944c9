package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// guideURL is the CLI's reference; each command's help ends with a link to
// its section, which holds what does not fit a screen.
const guideURL = "https://github.com/sandboxio/terraform-provider-sandboxio/blob/main/docs/guides/cli-reference.md"

// sharedFlag annotates the flags that run, run-code and mcp share (see
// command.briefFlagsOf).
const sharedFlag = "sandboxio/shared"

// groupCmd annotates the commands that only group others (policy, egress,
// image).
const groupCmd = "sandboxio/group"

// run parses args with a new command tree (the commands' flags bind to
// fresh variables on every run, so tests can run commands in-process) and
// returns the exit code. Every error cobra returns is a usage error (exit 2),
// printed with the command's synopsis.
func run(ctx context.Context, args []string, e *env) int {
	if len(args) > 0 && (args[0] == "-v" || args[0] == "--version") {
		args = append([]string{"version"}, args[1:]...)
	}
	// -help asked for help before cobra; pflag would read it as -h -e -l -p.
	for i, a := range args {
		if a == "--" {
			break
		}
		if a == "-help" {
			args = append(append(args[:i:i], "--help"), args[i+1:]...)
		}
	}
	code := exitOK
	root := newRoot(ctx, e, &code)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return code
	}
	if c := tableCommand(cmd); c != nil {
		fmt.Fprintf(e.stderr, "sandboxio %s: %v\nusage: sandboxio %s\nrun `sandboxio %s --help` for details\n", c.name, err, c.usage, c.name)
	} else {
		fmt.Fprintf(e.stderr, "%s: %v\nrun `%s --help` for details\n", cmd.CommandPath(), err, cmd.CommandPath())
	}
	return exitUsage
}

// newRoot builds the command tree from the command table; the command that
// runs stores its exit code in code.
func newRoot(ctx context.Context, e *env, code *int) *cobra.Command {
	root := &cobra.Command{
		Use:           "sandboxio",
		Short:         "policy-as-code for code-execution sandboxes",
		Args:          cobra.ArbitraryArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		// An unknown flag before an unknown command is reported as the
		// unknown command.
		FParseErrWhitelist: cobra.FParseErrWhitelist{UnknownFlags: true},
		RunE: func(cmd *cobra.Command, args []string) error {
			unknownCommand(cmd, e, args)
			*code = exitUsage
			return nil
		},
		SuggestionsMinimumDistance: 2,
	}
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.SetIn(e.stdin)
	root.SetHelpFunc(func(cmd *cobra.Command, _ []string) { writeHelp(cmd.OutOrStdout(), cmd) })
	root.SetUsageFunc(func(cmd *cobra.Command) error { writeHelp(cmd.ErrOrStderr(), cmd); return nil })
	root.SetFlagErrorFunc(flagError)
	root.SetHelpCommand(&cobra.Command{
		Use:   "help [COMMAND]",
		Short: "the help of a command",
		RunE: func(_ *cobra.Command, args []string) error {
			target, rest, err := root.Find(args)
			if err != nil || len(rest) > 0 {
				unknownCommand(target, e, rest)
				*code = exitUsage
				return nil
			}
			writeHelp(e.stdout, target)
			return nil
		},
	})

	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		c := commands[name]
		words := strings.Fields(name)
		parent := root
		for _, w := range words[:len(words)-1] {
			parent = group(parent, w, e, code)
		}
		leaf := &cobra.Command{
			Use:         words[len(words)-1],
			Short:       c.summary,
			Hidden:      c.hidden,
			Args:        cobra.ArbitraryArgs,
			Annotations: map[string]string{"sandboxio/command": name},
		}
		runner := c.setup(leaf.Flags())
		leaf.RunE = func(_ *cobra.Command, args []string) error {
			*code = runner(ctx, e, args)
			return nil
		}
		parent.AddCommand(leaf)
	}
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			// An unknown shell is a usage error, as an unknown command is.
			c.Short = "print a shell completion script: bash, zsh, fish or powershell"
			c.Args = cobra.ArbitraryArgs
			c.RunE = func(cmd *cobra.Command, args []string) error {
				unknownCommand(cmd, e, args)
				*code = exitUsage
				return nil
			}
		}
	}
	return root
}

// group returns parent's group command named word, made on first use.
func group(parent *cobra.Command, word string, e *env, code *int) *cobra.Command {
	for _, c := range parent.Commands() {
		if c.Name() == word {
			return c
		}
	}
	g := &cobra.Command{
		Use:                        word,
		Args:                       cobra.ArbitraryArgs,
		Annotations:                map[string]string{groupCmd: "true"},
		FParseErrWhitelist:         cobra.FParseErrWhitelist{UnknownFlags: true},
		SuggestionsMinimumDistance: 2,
		RunE: func(cmd *cobra.Command, args []string) error {
			unknownCommand(cmd, e, args)
			*code = exitUsage
			return nil
		},
	}
	parent.AddCommand(g)
	return g
}

// tableCommand is the command table's entry that cmd runs, if any.
func tableCommand(cmd *cobra.Command) *command {
	if cmd == nil {
		return nil
	}
	return commands[cmd.Annotations["sandboxio/command"]]
}

// unknownCommand answers the root or a group run without a command, or with
// one that does not exist (exit code exitUsage): the list of commands on standard error, and
// those whose name is close to the one typed.
func unknownCommand(cmd *cobra.Command, e *env, args []string) {
	if len(args) == 0 {
		writeOverview(e.stderr, cmd)
		return
	}
	if !cmd.HasParent() {
		fmt.Fprintf(e.stderr, "sandboxio: unknown command %q; run `sandboxio --help` for the list\n", strings.Join(args[:min(len(args), 2)], " "))
	} else {
		fmt.Fprintf(e.stderr, "sandboxio: unknown command %q\n", cmd.CommandPath()[len("sandboxio "):]+" "+args[0])
	}
	if s := suggestions(cmd, args); len(s) > 0 {
		fmt.Fprintf(e.stderr, "\nDid you mean this?\n\t%s\n", strings.Join(s, "\n\t"))
	}
	if cmd.HasParent() {
		fmt.Fprintln(e.stderr)
		writeOverview(e.stderr, cmd)
	}
}

// suggestions are the commands under cmd whose names are close to args[0],
// with the next word when it names one of a suggested group's commands
// ("polcy check": "policy check").
func suggestions(cmd *cobra.Command, args []string) []string {
	var out []string
	for _, s := range cmd.SuggestionsFor(args[0]) {
		prefix := strings.TrimPrefix(cmd.CommandPath()+" "+s, "sandboxio ")
		if sub, _, err := cmd.Find([]string{s}); err == nil && len(args) > 1 && sub.Annotations[groupCmd] != "" {
			for _, c := range sub.Commands() {
				if c.Name() == args[1] {
					prefix += " " + args[1]
				}
			}
		}
		out = append(out, "sandboxio "+prefix)
	}
	return out
}

// flagError keeps the flag package's wording for flag errors, which the CLI
// printed before it moved onto cobra and which scripts may match.
func flagError(cmd *cobra.Command, err error) error {
	var notExist *pflag.NotExistError
	var invalid *pflag.InvalidValueError
	var needs *pflag.ValueRequiredError
	switch {
	case errors.As(err, &notExist):
		err = fmt.Errorf("flag provided but not defined: -%s", notExist.GetSpecifiedName())
		// -spec was --spec before cobra, whose single dash starts
		// one-letter flags.
		if long, _, _ := strings.Cut(notExist.GetSpecifiedShortnames(), "="); len(long) > 1 && cmd.Flags().Lookup(long) != nil {
			err = fmt.Errorf("%w (did you mean --%s? a long flag takes two dashes)", err, long)
		}
	case errors.As(err, &invalid):
		err = fmt.Errorf("invalid value %q for flag -%s: %w", invalid.GetValue(), invalid.GetFlag().Name, errors.Unwrap(invalid))
	case errors.As(err, &needs):
		err = fmt.Errorf("flag needs an argument: -%s", needs.GetSpecifiedName())
	}
	return err
}

// writeHelp writes cmd's help: the command list for the root and groups, a
// screenful for a command.
func writeHelp(w io.Writer, cmd *cobra.Command) {
	if !cmd.HasParent() || cmd.Annotations[groupCmd] != "" {
		writeOverview(w, cmd)
		return
	}
	c := tableCommand(cmd)
	if c == nil { // cobra's own commands: completion and help
		c = &command{name: cmd.CommandPath()[len("sandboxio "):], usage: cmd.UseLine()[len("sandboxio "):],
			help: strings.TrimSpace(cmd.Long + "\n")}
		if c.help == "" {
			c.help = cmd.Short
		}
	}
	fmt.Fprintf(w, "usage: sandboxio %s\n\n%s\n", c.usage, strings.TrimSpace(c.help))
	if c.example != "" {
		fmt.Fprintf(w, "\nExamples:\n%s\n", indent(strings.TrimSpace(c.example), "  "))
	}
	var full []*pflag.Flag
	var brief []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if c.briefFlagsOf != "" && f.Annotations[sharedFlag] != nil {
			brief = append(brief, "--"+f.Name)
		} else {
			full = append(full, f)
		}
	})
	if len(full) > 0 {
		fmt.Fprintf(w, "\nFlags:\n%s", flagUsages(full))
	}
	if len(brief) > 0 {
		fmt.Fprintf(w, "And the flags of %s (sandboxio %[1]s --help):\n%s\n", c.briefFlagsOf, wrap(strings.Join(brief, " "), 90, "  "))
	}
	codes := exitCodesHelp
	if c.exitCodes != "" {
		codes = c.exitCodes
	}
	fmt.Fprintf(w, "\n%s\n\nMore: %s#%s\n", codes, guideURL, anchor(c.name))
}

// flagUsages lists flags one a line, as the flag package did, without
// pflag's [=true|false] after every boolean flag.
func flagUsages(flags []*pflag.Flag) string {
	left := make([]string, len(flags))
	width := 0
	for i, f := range flags {
		name, _ := pflag.UnquoteUsage(f)
		left[i] = "      --" + f.Name
		if f.Shorthand != "" {
			left[i] = "  -" + f.Shorthand + ", --" + f.Name
		}
		if name != "" {
			left[i] += " " + name
		}
		width = max(width, len(left[i]))
	}
	var b strings.Builder
	for i, f := range flags {
		_, usage := pflag.UnquoteUsage(f)
		switch f.DefValue {
		case "", "0", "0s", "false", "[]":
		default:
			usage += " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(&b, "%-*s  %s\n", width, left[i], usage)
	}
	return b.String()
}

// anchor is the guide's heading of a command ("## sandboxio policy check")
// as a link fragment.
func anchor(name string) string {
	return "sandboxio-" + strings.ReplaceAll(name, " ", "-")
}

// writeOverview lists the commands under cmd (the root or a group).
func writeOverview(w io.Writer, cmd *cobra.Command) {
	var lines [][2]string
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			switch {
			case !sub.IsAvailableCommand():
			case sub.Annotations[groupCmd] != "":
				walk(sub)
			default:
				lines = append(lines, [2]string{strings.TrimPrefix(sub.CommandPath(), "sandboxio "), sub.Short})
			}
		}
	}
	walk(cmd)
	sort.Slice(lines, func(i, j int) bool { return lines[i][0] < lines[j][0] })
	if !cmd.HasParent() {
		fmt.Fprintf(w, "sandboxio: policy-as-code for code-execution sandboxes.\n\nusage: sandboxio COMMAND [flags] [args]\n\nCommands:\n")
	} else {
		fmt.Fprintf(w, "usage: %s COMMAND [flags] [args]\n\nCommands:\n", cmd.CommandPath())
	}
	width := 14
	for _, l := range lines {
		width = max(width, len(l[0]))
	}
	for _, l := range lines {
		fmt.Fprintf(w, "  %-*s %s\n", width, l[0], l[1])
	}
	fmt.Fprintf(w, "\nRun `sandboxio COMMAND --help` for a command's flags; the guide has the rest:\n  %s\n\n%s\n", guideURL, overviewExitCodesHelp)
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}

// wrap fills the words of s into lines of at most width columns.
func wrap(s string, width int, prefix string) string {
	var b strings.Builder
	line := prefix
	for _, word := range strings.Fields(s) {
		if len(line) > len(prefix) && len(line)+1+len(word) > width {
			b.WriteString(line + "\n")
			line = prefix
		}
		if len(line) > len(prefix) {
			line += " "
		}
		line += word
	}
	b.WriteString(line)
	return b.String()
}

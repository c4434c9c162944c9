package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sandboxio/terraform-provider-sandboxio/sandbox"
)

// langByExt picks the interpreter from a code file's extension when --lang
// is not given.
var langByExt = map[string]string{".py": "python", ".sh": "sh", ".bash": "bash", ".js": "node", ".mjs": "node", ".rb": "ruby"}

func init() {
	register(&command{
		name:    "run-code",
		summary: "open a sandbox for a tenant and session, run a program in an interpreter, remove it",
		usage:   "run-code --spec FILE|- --tenant ID --session ID [--lang LANG] [flags] CODE_FILE|-",
		help: `Opens a sandbox from a spec as ` + "`sandboxio run`" + ` does, runs the program in CODE_FILE (- reads
it from standard input) in an interpreter of the image (--lang, or the file's extension),
streams its output and removes the sandbox. The program's exit code is passed through.`,
		example: `sandboxio run-code --spec spec.json --tenant acme --session s-42 --lang python script.py
echo 'print(1)' | sandboxio run-code --spec spec.json --tenant acme --session s-42 --lang python -`,
		exitCodes: runExitCodesHelp,
		setup: func(fs *pflag.FlagSet) runFunc {
			f := &runFlags{commandName: "run-code"}
			f.declare(fs)
			lang := fs.String("lang", "", "the `LANG`uage: python, sh, bash, node or ruby (default: from the file's extension)")
			return func(ctx context.Context, e *env, args []string) int {
				if len(args) != 1 {
					fmt.Fprintf(e.stderr, "sandboxio run-code: want exactly one CODE_FILE argument (- for standard input), got %d\n", len(args))
					return exitUsage
				}
				l := *lang
				if l == "" {
					l = langByExt[strings.ToLower(filepath.Ext(args[0]))]
				}
				if l == "" {
					fmt.Fprintf(e.stderr, "sandboxio run-code: cannot tell the language of %s: pass --lang (python, sh, bash, node or ruby)\n", args[0])
					return exitUsage
				}
				// Before anything is read or opened: an unknown language
				// would otherwise be refused only inside a new sandbox.
				if !slices.Contains(sandbox.Languages(), strings.ToLower(l)) {
					fmt.Fprintf(e.stderr, "sandboxio run-code: --lang %q is not a language run-code runs; use one of %s\n",
						l, strings.Join(sandbox.Languages(), ", "))
					return exitUsage
				}
				if args[0] == "-" && f.spec == "-" {
					fmt.Fprintf(e.stderr, "sandboxio run-code: --spec - and CODE_FILE - cannot both read standard input\n")
					return exitUsage
				}
				if code := f.scrubSecrets(e); code != 0 {
					return code
				}
				var code []byte
				var err error
				if args[0] == "-" {
					f.usesStdin = true
					code, err = io.ReadAll(io.LimitReader(e.stdin, 16<<20))
				} else {
					code, err = os.ReadFile(args[0])
				}
				if err != nil {
					fmt.Fprintf(e.stderr, "sandboxio run-code: read code: %v; pass the program's file, or - to read it from standard input\n", err)
					return exitUsage
				}
				return f.runIn(ctx, e, func(ctx context.Context, sb *sandbox.Sandbox) (sandbox.Result, error) {
					return sb.RunCode(ctx, l, string(code), f.runOptions(e, nil))
				})
			}
		},
	})
}

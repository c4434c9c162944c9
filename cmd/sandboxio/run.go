package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/sandboxio/terraform-provider-sandboxio/sandbox"
)

func init() {
	register(&command{
		name:    "run",
		summary: "open a sandbox for a tenant and session, run one command in it, remove it",
		usage:   "run --spec FILE|- --tenant ID --session ID [flags] -- COMMAND [ARG]...",
		help: `Opens a sandbox from a spec rendered by Terraform, checks it first (sha256, tenant binding,
policies, isolation), runs COMMAND in it without a shell, streams its output with secrets
redacted, and removes the sandbox whatever happens. The command's exit code is passed through.`,
		example: `sandboxio run --spec spec.json --spec-sha256 "$(terraform output -raw tenant_spec_sha256)" \
    --tenant acme --session s-42 --timeout 30s --audit audit.jsonl -- sh -c 'echo hello'`,
		exitCodes: runExitCodesHelp,
		setup: func(fs *pflag.FlagSet) runFunc {
			f := &runFlags{commandName: "run"}
			f.declare(fs)
			stdin := fs.Bool("stdin", false, "pass this process's standard input to the command")
			return func(ctx context.Context, e *env, args []string) int {
				if len(args) == 0 {
					fmt.Fprintf(e.stderr, "sandboxio run: no command: put it after --, e.g. sandboxio run --spec spec.json --tenant acme --session s-42 -- sh -c 'echo hi'\n")
					return exitUsage
				}
				var in []byte
				if *stdin && f.spec == "-" {
					fmt.Fprintf(e.stderr, "sandboxio run: --spec - and --stdin cannot both read standard input\n")
					return exitUsage
				}
				if code := f.scrubSecrets(e); code != 0 {
					return code
				}
				if *stdin {
					f.usesStdin = true
					var err error
					if in, err = io.ReadAll(io.LimitReader(e.stdin, 64<<20)); err != nil {
						fmt.Fprintf(e.stderr, "sandboxio run: read standard input: %v\n", err)
						return exitUsage
					}
				}
				return f.runIn(ctx, e, func(ctx context.Context, sb *sandbox.Sandbox) (sandbox.Result, error) {
					return sb.Run(ctx, args, f.runOptions(e, in))
				})
			}
		},
	})
}

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
		usage:   "run --spec FILE|- --tenant ID --session ID [--spec-sha256 HEX] [--timeout 30s] [--audit FILE] [flags] -- COMMAND [ARG]...",
		help: `Opens a sandbox from a spec rendered by Terraform, runs COMMAND in it, prints its output
and removes the sandbox, whatever happens (an error, a timeout, Ctrl-C). The command's
exit code is passed through.

  terraform output -raw tenant_spec > spec.json
  sandboxio run --spec spec.json --spec-sha256 "$(terraform output -raw tenant_spec_sha256)" \
      --tenant acme --session s-42 --timeout 30s --audit audit.jsonl -- sh -c 'echo hello'

The spec is data.sandboxio_tenant_sandbox's spec (rendered for --tenant and --session;
any other tenant or session is refused), or a template's spec, which is rendered here for
--tenant and --session (with --label). Before anything is provisioned the spec is checked:
its sha256 against --spec-sha256 (without the flag the spec is not verified, and a warning
says so), its tenant binding, the same policy bundle terraform plan evaluates (with
--policy and --waivers as the provider's policy_paths and policy_waivers), and
require_isolation against the tier of the live backend; --timeout must not exceed the
spec's timeout_seconds. A refusal provisions nothing.

Everything after -- is the command and its arguments, run without a shell (use sh -c for
one). Its output is streamed as it is printed, standard output to standard output and
standard error to standard error, with secret values redacted on the way (a few bytes
may wait for the next write, to catch a value split across two). A command killed at its
timeout or at a cap keeps what it printed until then, and the CLI exits with the class's
code below. Each stream is capped at 64 MiB: past it the command is stopped,
ResourceLimitExceeded(output), exit 68. --stdin passes this process's
standard input to the command. A progress line goes to standard error while the image is
prepared (the local image ` + sandbox.LocalImage + ` is built on first use, with no registry)
and while the sandbox starts; --quiet drops it.

` + secretsHelp + `

` + hookHelp + `

--audit appends one JSON record per event (created, exec, timeout, limit_exceeded,
killed, expired, gone, orphaned, refused, failed) with the sandbox id, backend, tier,
tenant, session, labels, network policy, caps and disk-cap strategy, timeouts,
blocked_egress (with its destinations; see sandboxio egress report), exit code and
durations.`,
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

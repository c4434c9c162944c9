// Package sandbox is sandboxio's run-time helper: it opens a sandbox for one
// tenant and session from the spec Terraform rendered, runs commands and
// code in it, uploads files, and closes it.
//
//	c, err := sandbox.New(ctx, sandbox.Config{Audit: sandbox.NewAuditLog(auditFile, nil)})
//	...
//	err = c.With(ctx, sandbox.Request{
//		Spec:       specJSON,   // data.sandboxio_tenant_sandbox.X.spec
//		SpecSHA256: specSHA256, // data.sandboxio_tenant_sandbox.X.spec_sha256
//		TenantID:   "acme",
//		SessionID:  "s-42",
//		Secrets:    sandbox.NewSecrets(map[string]string{"OPENAI_API_KEY": key}),
//	}, func(ctx context.Context, sb *sandbox.Sandbox) error {
//		res, err := sb.RunCode(ctx, "python", "print(1)", sandbox.RunOptions{})
//		...
//	})
//
// Open checks the spec, its hash, tenancy, secrets and the policy bundle
// before provisioning anything; Run and RunCode pass the pre-execution hook
// first. Errors are *Error values matched with errors.Is. Secret values are
// redacted from every output, which guards against echoes, not against code
// that means to leak them. See docs/design/sandbox-runtime.md.
package sandbox

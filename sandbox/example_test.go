package sandbox_test

import (
	"context"
	"fmt"
	"os"

	"github.com/sandboxio/terraform-provider-sandboxio/sandbox"
)

// Open a sandbox for one tenant and session from the spec Terraform
// rendered, run code in it, and have it removed on every path.
func Example() {
	ctx := context.Background()
	spec, _ := os.ReadFile("spec.json") // terraform output -raw tenant_spec
	audit, _ := os.OpenFile("audit.jsonl", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	defer audit.Close()

	c, err := sandbox.New(ctx, sandbox.Config{Audit: sandbox.NewAuditLog(audit, nil)})
	if err != nil {
		fmt.Println(err)
		return
	}
	err = c.With(ctx, sandbox.Request{
		Spec:       spec,
		SpecSHA256: os.Getenv("SPEC_SHA256"), // terraform output -raw tenant_spec_sha256
		TenantID:   "acme",
		SessionID:  "s-42",
		Secrets:    sandbox.NewSecrets(map[string]string{"OPENAI_API_KEY": os.Getenv("OPENAI_API_KEY")}),
	}, func(ctx context.Context, sb *sandbox.Sandbox) error {
		if err := sb.Upload(ctx, "/work/data.csv", []byte("a,b\n1,2\n"), 0o644); err != nil {
			return err
		}
		res, err := sb.RunCode(ctx, "python", "print(open('/work/data.csv').read())", sandbox.RunOptions{})
		if err != nil {
			return err
		}
		fmt.Printf("exit %d: %s", res.ExitCode, res.Stdout)
		return nil
	})
	if limit, ok := sandbox.LimitOf(err); ok {
		fmt.Println("the code hit its", limit, "cap")
	} else if err != nil {
		fmt.Println(sandbox.ClassOf(err), err)
	}
}

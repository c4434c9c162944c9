package bench

import (
	"fmt"
	"testing"

	fwprovider "github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	_ "github.com/sandboxio/terraform-provider-sandboxio/internal/backends/all"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/bench/noop"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/provider"
)

// nullObject is a null value of every attribute of typ but those in set.
func nullObject(typ tftypes.Object, set map[string]tftypes.Value) tftypes.Value {
	vals := map[string]tftypes.Value{}
	for name, t := range typ.AttributeTypes {
		if v, ok := set[name]; ok {
			vals[name] = v
			continue
		}
		vals[name] = tftypes.NewValue(t, nil)
	}
	return tftypes.NewValue(typ, vals)
}

// BenchmarkPlanInProcess drives the provider server's RPCs as terraform plan
// does for one sandboxio_template (validate, then plan a create), without the
// plugin protocol's process and transport, so that a CPU profile
// (-cpuprofile) shows the provider's own work per template; the noop
// sub-benchmark does the same for the do-nothing provider with the same
// schema.
func BenchmarkPlanInProcess(b *testing.B) {
	b.Run("sandboxio", func(b *testing.B) { planInProcess(b, provider.New("bench")(), "sandboxio_template") })
	b.Run("noop", func(b *testing.B) { planInProcess(b, noop.New(), "noop_template") })
}

func planInProcess(b *testing.B, p fwprovider.Provider, typeName string) {
	ctx := b.Context()
	srv, err := providerserver.NewProtocol6WithError(p)()
	if err != nil {
		b.Fatal(err)
	}
	schemas, err := srv.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		b.Fatal(err)
	}
	provType := schemas.Provider.ValueType().(tftypes.Object)
	provCfg, err := tfprotov6.NewDynamicValue(provType, nullObject(provType, nil))
	if err != nil {
		b.Fatal(err)
	}
	cr, err := srv.ConfigureProvider(ctx, &tfprotov6.ConfigureProviderRequest{TerraformVersion: "1.11.0", Config: &provCfg})
	if err != nil || len(cr.Diagnostics) > 0 {
		b.Fatalf("configure: %v %v", err, cr.Diagnostics)
	}
	typ := schemas.ResourceSchemas[typeName].ValueType().(tftypes.Object)
	str := func(s string) tftypes.Value { return tftypes.NewValue(tftypes.String, s) }
	num := func(n int64) tftypes.Value { return tftypes.NewValue(tftypes.Number, n) }
	strMap := func(k, v string) tftypes.Value {
		return tftypes.NewValue(tftypes.Map{ElementType: tftypes.String}, map[string]tftypes.Value{k: str(v)})
	}
	config := func(i int) tfprotov6.DynamicValue {
		v := nullObject(typ, map[string]tftypes.Value{
			"name": str(fmt.Sprintf("t%d", i)), "backend": str("docker://"), "image": str("python:3.12-slim"),
			"runtime": str("runsc"), "require_isolation": str("GVISOR"),
			"timeout_seconds": num(120), "lifetime_seconds": num(600),
			"env": strMap("LANG", "C.UTF-8"), "labels": strMap("team", "agents"),
		})
		dv, err := tfprotov6.NewDynamicValue(typ, v)
		if err != nil {
			b.Fatal(err)
		}
		return dv
	}
	prior, err := tfprotov6.NewDynamicValue(typ, tftypes.NewValue(typ, nil))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		cfg := config(i)
		vr, err := srv.ValidateResourceConfig(ctx, &tfprotov6.ValidateResourceConfigRequest{TypeName: typeName, Config: &cfg})
		if err != nil || len(vr.Diagnostics) > 0 {
			b.Fatalf("validate: %v %v", err, vr.Diagnostics)
		}
		pr, err := srv.PlanResourceChange(ctx, &tfprotov6.PlanResourceChangeRequest{
			TypeName: typeName, Config: &cfg, ProposedNewState: &cfg, PriorState: &prior,
		})
		if err != nil {
			b.Fatal(err)
		}
		for _, d := range pr.Diagnostics {
			if d.Severity == tfprotov6.DiagnosticSeverityError {
				b.Fatalf("plan: %s: %s", d.Summary, d.Detail)
			}
		}
	}
}

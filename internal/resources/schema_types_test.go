package resources

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/inputs"
)

// TestSchemaTypes holds the types `sandboxio policy check` decodes plans
// into (inputs.TemplateType, ...) to the provider's schemas, so that the
// check reads a plan as a value of the very type the provider reads: one
// reader (inputs.ReadTemplate, ...) for both.
func TestSchemaTypes(t *testing.T) {
	ctx := t.Context()
	for name, tc := range map[string]struct {
		r    resource.Resource
		want tftypes.Type
	}{
		"sandboxio_template":       {NewTemplateResource(), inputs.TemplateType},
		"sandboxio_network_policy": {NewNetworkPolicyResource(), inputs.NetworkPolicyType},
		"sandboxio_resource_caps":  {NewResourceCapsResource(), inputs.ResourceCapsType},
	} {
		var resp resource.SchemaResponse
		tc.r.Schema(ctx, resource.SchemaRequest{}, &resp)
		if got := resp.Schema.Type().TerraformType(ctx); !got.Equal(tc.want) {
			t.Errorf("%s: the schema's type is %s, the reader's %s", name, got, tc.want)
		}
	}
}

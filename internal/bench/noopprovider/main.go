// Command noopprovider is a framework provider whose one resource has the
// template's schema and does nothing. The plan benchmark uses it to separate
// the cost of being a plugin provider from the cost of sandboxio's own
// policy, spec and validation work.
package main

import (
	"context"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

type noopProvider struct{}

func (noopProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "noop"
}
func (noopProvider) Schema(context.Context, provider.SchemaRequest, *provider.SchemaResponse) {}
func (noopProvider) Configure(context.Context, provider.ConfigureRequest, *provider.ConfigureResponse) {
}
func (noopProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{func() resource.Resource { return noopTemplate{} }}
}
func (noopProvider) DataSources(context.Context) []func() datasource.DataSource { return nil }

type noopTemplate struct{}

func (noopTemplate) Metadata(_ context.Context, _ resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = "noop_template"
}

func (noopTemplate) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	str := func() schema.Attribute { return schema.StringAttribute{Optional: true} }
	resp.Schema = schema.Schema{Attributes: map[string]schema.Attribute{
		"id": schema.StringAttribute{Computed: true}, "name": str(), "backend": str(), "image": str(),
		"runtime": str(), "require_isolation": str(),
		"timeout_seconds":  schema.Int64Attribute{Optional: true},
		"lifetime_seconds": schema.Int64Attribute{Optional: true},
		"env":              schema.MapAttribute{ElementType: types.StringType, Optional: true},
		"labels":           schema.MapAttribute{ElementType: types.StringType, Optional: true},
	}}
}

func (noopTemplate) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	resp.State.Raw = req.Plan.Raw
}
func (noopTemplate) Read(context.Context, resource.ReadRequest, *resource.ReadResponse)       {}
func (noopTemplate) Update(context.Context, resource.UpdateRequest, *resource.UpdateResponse) {}
func (noopTemplate) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {}

func main() {
	err := providerserver.Serve(context.Background(), func() provider.Provider { return noopProvider{} },
		providerserver.ServeOpts{Address: "registry.terraform.io/sandboxio/noop", ProtocolVersion: 6})
	if err != nil {
		log.Fatal(err)
	}
}

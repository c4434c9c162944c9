// Package noop is a framework provider whose resources do nothing.
// noop_template has exactly sandboxio_template's schema, so the plan
// benchmarks can separate the cost of the schema and of being a plugin
// provider from the cost of sandboxio's own policy, spec and validation
// work; noop_bare has a minimal schema of plain attributes.
package noop

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/resources"
)

// New returns the do-nothing provider.
func New() provider.Provider { return noopProvider{} }

type noopProvider struct{}

func (noopProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "noop"
}
func (noopProvider) Schema(context.Context, provider.SchemaRequest, *provider.SchemaResponse) {}
func (noopProvider) Configure(context.Context, provider.ConfigureRequest, *provider.ConfigureResponse) {
}
func (noopProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{
		func() resource.Resource { return noopTemplate{} },
		func() resource.Resource { return noopBare{} },
	}
}
func (noopProvider) DataSources(context.Context) []func() datasource.DataSource { return nil }

// noopTemplate borrows sandboxio_template's schema and does nothing else.
type noopTemplate struct{ noopBare }

func (noopTemplate) Metadata(_ context.Context, _ resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = "noop_template"
}

func (noopTemplate) Schema(ctx context.Context, req resource.SchemaRequest, resp *resource.SchemaResponse) {
	resources.NewTemplateResource().Schema(ctx, req, resp)
}

type noopBare struct{}

func (noopBare) Metadata(_ context.Context, _ resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = "noop_bare"
}

func (noopBare) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
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

func (noopBare) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	resp.State.Raw = req.Plan.Raw
}
func (noopBare) Read(context.Context, resource.ReadRequest, *resource.ReadResponse)       {}
func (noopBare) Update(context.Context, resource.UpdateRequest, *resource.UpdateResponse) {}
func (noopBare) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {}

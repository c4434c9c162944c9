// Command terraform-provider-sandboxio serves the sandboxio Terraform provider.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	_ "github.com/sandboxio/terraform-provider-sandboxio/internal/backends/all" // the backends this program serves
	"github.com/sandboxio/terraform-provider-sandboxio/internal/provider"
)

// version is set at build time: -ldflags "-X main.version=1.2.3".
var version = "dev"

//go:generate go run github.com/hashicorp/terraform-plugin-docs/cmd/tfplugindocs generate --provider-name sandboxio

func main() {
	var debug bool
	flag.BoolVar(&debug, "debug", false, "run the provider with support for debuggers like delve")
	flag.Parse()

	err := providerserver.Serve(context.Background(), provider.New(version), providerserver.ServeOpts{
		Address:         "registry.terraform.io/sandboxio/sandboxio",
		Debug:           debug,
		ProtocolVersion: 6,
	})
	if err != nil {
		log.Fatal(err.Error())
	}
}

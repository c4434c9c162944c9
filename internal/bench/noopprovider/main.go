// Command noopprovider serves the do-nothing provider of package noop for
// the plan benchmark.
package main

import (
	"context"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/bench/noop"
)

func main() {
	err := providerserver.Serve(context.Background(), noop.New,
		providerserver.ServeOpts{Address: "registry.terraform.io/sandboxio/noop", ProtocolVersion: 6})
	if err != nil {
		log.Fatal(err)
	}
}

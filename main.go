// Command terraform-provider-sandboxio serves the sandboxio Terraform provider.
package main

import (
	"context"
	"flag"
	"log"
	"os"
	"strings"

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
	if !debug {
		quietUnlessLogging(os.Environ(), os.Setenv)
	}

	err := providerserver.Serve(context.Background(), provider.New(version), providerserver.ServeOpts{
		Address:         "registry.terraform.io/sandboxio/sandboxio",
		Debug:           debug,
		ProtocolVersion: 6,
	})
	if err != nil {
		log.Fatal(err.Error())
	}
}

// sdkLogLevels are the variables the plugin SDKs read for their loggers'
// levels. Unset, every logger is at TRACE: each RPC writes JSON lines to
// stderr that Terraform parses and, without TF_LOG or TF_LOG_PROVIDER,
// drops: a large part of a plan's CPU (docs/design/plan-cost.md).
var sdkLogLevels = []string{"TF_LOG_SDK", "TF_LOG_SDK_PROTO", "TF_LOG_SDK_FRAMEWORK", "TF_LOG_PROVIDER"}

// quietUnlessLogging turns the SDK loggers off when no TF_LOG* variable is
// set, that is when Terraform discards whatever the provider logs. Any such
// variable (TF_LOG, TF_LOG_PROVIDER, TF_LOG_SDK_*, even TF_LOG_PATH) leaves
// logging as the SDKs set it. Debug mode is left alone by the caller: there
// the provider's stderr is the developer's terminal.
func quietUnlessLogging(environ []string, setenv func(key, value string) error) {
	for _, kv := range environ {
		if strings.HasPrefix(kv, "TF_LOG") {
			return
		}
	}
	for _, k := range sdkLogLevels {
		_ = setenv(k, "OFF")
	}
}

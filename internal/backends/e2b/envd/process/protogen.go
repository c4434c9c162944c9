//go:build protogen

package process

//go:generate protoc --proto_path=. --go_out=. --go_opt=paths=source_relative --go_opt=Mprocess.proto=github.com/sandboxio/terraform-provider-sandboxio/internal/backends/e2b/envd/process --connect-go_out=. --connect-go_opt=paths=source_relative --connect-go_opt=Mprocess.proto=github.com/sandboxio/terraform-provider-sandboxio/internal/backends/e2b/envd/process process.proto

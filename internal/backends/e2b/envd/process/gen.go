// Package process holds the Go code generated from envd's process API (the
// Connect RPC service an E2B sandbox serves for commands), from process.proto of
// e2b-dev/E2B at b8029973aa7da5f741f7bb1a9f833b38a0885438, unchanged (Apache
// 2.0, Copyright E2B). Regenerate with protoc, protoc-gen-go v1.36.12 and
// protoc-gen-connect-go v1.19.1 on PATH (the directive in protogen.go is behind
// the tag, so `make generate` never needs protoc):
//
//	go generate -tags protogen ./internal/backends/e2b/envd/process
package process

// Package process holds the Go code generated from envd's process API, the
// Connect RPC service an E2B sandbox serves for commands.
//
// process.proto is spec/envd/process/process.proto of e2b-dev/E2B at commit
// b8029973aa7da5f741f7bb1a9f833b38a0885438, unchanged (Apache License 2.0,
// Copyright E2B). The generated code is committed so that building and CI
// need no protoc; regenerate with protoc (Debian's protobuf-compiler),
// protoc-gen-go v1.36.12 and protoc-gen-connect-go v1.19.1 on PATH:
//
//	go generate -tags protogen ./internal/backends/e2b/envd/process
//
// The directive is in protogen.go, behind that build tag, so that `make
// generate` (the docs) never needs protoc.
package process

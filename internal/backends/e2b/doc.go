// Package e2b is the E2B backend (e2b://): sandboxes are Firecracker microVMs
// (tier MICROVM) made from an E2B template, through E2B's published wire
// protocol: the REST API of spec/openapi.yml and envd's process API over
// Connect RPC (generated code in envd/process), both pinned at e2b-dev/E2B
// commit b8029973aa7da5f741f7bb1a9f833b38a0885438, as the official SDK speaks
// them. Secrets go in each command's envs only, never in the create request.
//
// See docs/design/cloud-backends.md for the mapping of each field.
package e2b

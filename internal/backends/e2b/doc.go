// Package e2b is the E2B backend (e2b://): sandboxes are Firecracker
// microVMs (tier MICROVM) made from an E2B template, through E2B's
// published wire protocol.
//
//   - Control plane: the REST API of spec/openapi.yml in e2b-dev/E2B at
//     commit b8029973aa7da5f741f7bb1a9f833b38a0885438: create (POST
//     /v2/sandboxes, the call the official JavaScript SDK 2.51.0 makes; its
//     NewSandboxV2 body is NewSandbox without "secure"), list by metadata
//     (GET /v2/sandboxes?metadata=), kill (DELETE /sandboxes/{id}). Auth is
//     X-API-Key from E2B_API_KEY; the base URL is E2B_API_URL, else
//     https://api.DOMAIN (the DSN's domain option, else E2B_DOMAIN, else
//     e2b.app).
//   - Commands: envd's process API (spec/envd/process/process.proto, same
//     commit; generated code in envd/process) over Connect RPC in JSON, as
//     the SDK speaks it, authenticated by the sandbox's envdAccessToken
//     (X-Access-Token) and addressed with E2b-Sandbox-Id/E2b-Sandbox-Port
//     at E2B_SANDBOX_URL, else sandbox.DOMAIN (E2B's domains) or
//     49983-ID.DOMAIN. Files: envd's POST /files (multipart).
//
// Mapping: image is the template ID; lifetime_seconds is the sandbox
// timeout (E2B kills it then); labels are metadata; env is envVars; secrets
// go in each command's envs only, never in the create request. Egress deny
// is allow_internet_access=false; deny with an allow list is denyOut
// 0.0.0.0/0 plus allowOut (CIDR, IP or domain). Caps belong to the
// template: anything but the defaults is refused (SBX-RES-002).
//
// e2bserver is the local conformance server, refereed by the official SDK.
package e2b

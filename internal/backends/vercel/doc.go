// Package vercel is the Vercel Sandbox backend (vercel://TEAM/PROJECT):
// sandboxes are Firecracker microVMs (tier MICROVM) run by Vercel, reached
// through the REST API as the official SDK uses it (npm @vercel/sandbox
// 3.5.0, dist/api-client).
//
//   - Create: POST /v2/sandboxes with projectId, runtime (the spec's image:
//     node22, node24, python3.13), name (sandboxio- and a nonce), timeout in
//     ms (the lifetime: Vercel stops the session then), resources.vcpus,
//     networkPolicy, env and tags (the labels; at most 5), persistent false.
//     Every call carries ?teamId=TEAM. A create whose outcome is unknown
//     (429, 5xx, no answer) is retried only after a look by name (GET
//     /v2/sandboxes/NAME); a sandbox found is the one it made, and Vercel
//     refuses a second of the same name.
//   - Commands: POST /v2/sandboxes/sessions/SID/cmd with wait, answered as
//     an NDJSON stream: the command, stdout and stderr lines, the command
//     with its exit code. The timeout goes with the command (Vercel kills
//     it then); the adapter stops waiting at the same time and kills it
//     (POST .../cmd/CID/kill). The API has no standard input: stdin is
//     uploaded to a file the command reads.
//   - Files: POST .../fs/write, a gzipped tar extracted at / with the mode.
//   - Kill: stop the session (POST .../stop), then DELETE
//     /v2/sandboxes/NAME; a stopped session is never resumed.
//   - List: GET /v2/sandboxes?project=&namePrefix=sandboxio-&tags=K:V (the
//     API filters by one tag; the other labels are matched here).
//
// Credentials: VERCEL_OIDC_TOKEN (its claims must name the DSN's team and
// project) or VERCEL_TOKEN, as a bearer token that never leaves the
// vendorapi.Credential. SANDBOXIO_VERCEL_API_URL replaces
// https://vercel.com/api (the local conformance server).
//
// Caps: whole vCPUs from 1 to 8 with 2048 MB of memory each; anything else
// is refused (SBX-RES-007), as are disk and process caps other than the
// defaults (SBX-RES-004) and a lifetime above the maximum (SBX-TMO-003).
// Egress deny is networkPolicy deny-all; an allow list is the list form:
// domains in allow, addresses in subnets.allow.
//
// Secrets go in each command's env, never in the create request: Vercel's
// credential brokering (networkPolicy header injection per domain) brokers
// HTTP credentials for a destination, which a sandboxio secret (an
// environment variable of the code) is not.
//
// vercelserver is the local conformance server, refereed by the official SDK.
package vercel

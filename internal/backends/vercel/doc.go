// Package vercel is the Vercel Sandbox backend (vercel://TEAM/PROJECT):
// sandboxes are Firecracker microVMs (tier MICROVM) run by Vercel, reached
// through the REST API as the official SDK uses it (npm @vercel/sandbox 3.5.0,
// dist/api-client). A create whose outcome is unknown is retried only after a
// look by name; secrets go in each command's env, never in the create request.
//
// See docs/design/cloud-backends.md for the calls, credentials and caps.
package vercel

// Package backendtest is the conformance suite every sandbox backend passes:
// one table of behaviours, run with Run(t, h) against a Harness that plugs a
// backend (Docker, or a cloud adapter talking to its conformance server or
// to the live service) into it.
//
// # What a harness supplies
//
// Required:
//
//   - Backend: the backends.Backend under test, opened as a user would open
//     it (register.go's Open, or the package's constructor). The suite never
//     closes it.
//   - Spec: a spec this backend can open: Backend (the DSN), Image (the
//     image or template), Runtime where it applies, a network policy of deny,
//     caps, timeout_seconds and lifetime_seconds. The suite sets the tenant
//     and session (with model.Spec.ForTenant, so the reserved labels agree),
//     adds labels of its own, and overrides the network policy, caps,
//     timeouts, env and secret names where a behaviour needs them. The image
//     or template must provide a POSIX shell as sh and /bin/sh, with cat,
//     printf, sleep, ls, stat and a /proc filesystem (busybox does).
//
// Optional; what a harness leaves unset is skipped with a visible reason,
// never passed silently:
//
//   - Observe(ctx, id) returns what the vendor side recorded for a sandbox:
//     its labels (metadata, tags), its plain environment, its network
//     control, its caps and its lifetime. A conformance server reads its own
//     state; Docker inspects the container. Each field left nil is not
//     checked. Behaviours that cannot be seen from inside the sandbox
//     (caps a sandbox does not expose under /sys/fs/cgroup, an allow list)
//     need it.
//   - Faults: fault injection, for a conformance server. Inject arms a fault
//     for the next requests of one operation; Requests counts the requests
//     of an operation the server received since the last Inject (the
//     faulted ones included). Fault.Status is an HTTP status; a gRPC server
//     answers with the code of the same meaning: 401 UNAUTHENTICATED, 403
//     PERMISSION_DENIED, 404 NOT_FOUND, 409 ALREADY_EXISTS, 429
//     RESOURCE_EXHAUSTED, 500 INTERNAL, 503 UNAVAILABLE, and RetryAfter as
//     the retry delay its SDK honours (or as a "retry-after" trailer).
//     Operations are named by the constants OpCreate, OpList, OpGet, OpKill,
//     OpRun and OpUpload; a harness maps each to its vendor's calls (E2B:
//     POST /sandboxes, GET /v2/sandboxes, GET /sandboxes/{id}, DELETE
//     /sandboxes/{id}, the envd process Start, the envd file upload).
//   - Credential: the API key (or token) the backend was opened with, made
//     up for the test (a canary). The suite fails if it appears in any
//     error, Info or formatted value it sees.
//   - AllowList: entries of an egress allow list this backend enforces (E2B
//     and Modal). Empty means the backend has no allow lists: opening with
//     one must be refused with a typed error and create nothing.
//   - EgressTarget: host:port of a TCP listener reachable from a sandbox
//     with open egress. Where the sandbox still shows a non-loopback
//     interface under egress deny (a vendor firewall rather than no
//     network), network-deny connects to it from inside and wants a
//     failure.
//   - Code: the RunCode language, program and expected output (default sh).
//   - ExecTimeout, Lifetime: the short timeout and lifetime the timing
//     behaviours use (defaults 2 s and 4 s; whole seconds suit a vendor that
//     counts in seconds).
//   - SecretsInPlainEnv: the vendor has no secret store, so the adapter
//     passes secret values as the sandbox's environment (E2B's envVars).
//     When false and Observe reports PlainEnv, a secret value found there
//     fails secrets.
//   - Orphan, or else LifetimeKeeper (one is required by lifetime-locked):
//     Orphan opens a sandbox in an owner process of its own, runs
//     SwitchOffScript in it, and kills that owner and its helpers (Docker's
//     watcher) outright; LifetimeKeeper names what keeps the lifetime with
//     no client process at all (a Kubernetes kubelet, a vendor's control
//     plane), and the suite then runs the script itself and waits.
//     LifetimeBound is how long past the lifetime the sandbox may still be
//     listed (default GoneWithin); Init, when set, is the name PID 1 of the
//     sandbox must have.
//   - Skip: behaviour name → why this harness cannot show it (shown in the
//     test output). The key BinaryOutput says command output is text only:
//     binary input and files are then checked by digest. Only: run just these behaviours (a second runtime that
//     repeats the isolation-relevant subset, say).
//   - Serial: run the behaviours one at a time (a live service's
//     concurrency quota). GoneWithin: how long a killed or expired sandbox
//     may still be listed (default 15 s).
//
// # A harness
//
// A cloud backend's test, against its conformance server (srv), looks like:
//
//	func TestConformance(t *testing.T) {
//		srv := startServer(t) // runs commands in Docker sandboxes
//		b, err := e2b.New(e2b.Config{APIURL: srv.URL, APIKey: canaryKey})
//		if err != nil {
//			t.Fatal(err)
//		}
//		backendtest.Run(t, backendtest.Harness{
//			Name:       "e2b-server",
//			Backend:    b,
//			Spec:       func() model.Spec { return spec("e2b://", "base") },
//			Observe:    srv.Observe,   // labels, envVars, network fields, caps
//			Faults:     srv,           // Inject, Requests, Clear
//			Credential: canaryKey,
//			AllowList:  []string{"10.1.2.0/24"},
//			SecretsInPlainEnv: true,   // E2B has envVars, no secret store
//		})
//	}
//
// selftest_test.go in this package is a complete worked example of the
// fault side: a control plane with Inject/Requests/Clear, and an adapter
// whose create looks by label before any retry. Docker's is
// internal/backends/docker/conformance_test.go.
//
// # Behaviours
//
// Each is a subtest named by its Behaviour constant; they run in parallel
// unless Serial is set. Every sandbox a behaviour opens carries the label
// sandboxio-conformance=<run id>, and after all of them ended the suite
// fails if List still finds one (no-leftovers). Sandboxes are closed by
// t.Cleanup; fault behaviours that make an adapter believe a live sandbox is
// gone remove it through backends.Reaper when the backend implements it,
// otherwise the harness must (its server's teardown).
//
// The fault behaviours need Faults. They check that 401 and 403 give a
// ConfigurationError naming the credentials, a 404 on a sandbox's path
// SandboxGone, 409 a typed refusal, that 429 and 5xx on an idempotent call
// are retried with backoff honouring Retry-After, that an error that
// persists ends within the caller's context, and that a create is never
// retried blindly: after a create that failed or whose outcome is unknown
// (the server created the sandbox and then failed), exactly one sandbox
// with the create's labels exists if Create succeeded (the one returned),
// none if it failed.
package backendtest

// Package docker is the Docker Engine backend: sandboxes are containers made
// through the Engine API, every accepted policy is enforced by the daemon, and
// what it cannot enforce is refused before anything is created. Egress deny is
// network mode none, observed under runc (package egress); PID 1 is
// sandboxio's own init (sinit.go), with a host backstop for gVisor
// (backstop.go); a watcher (reaper.go) removes a dead owner's sandboxes.
//
// See docs/design/docker-backend.md and docs/design/docker-lifetime.md.
package docker

package fakeserver

import (
	"slices"
	"sync"
)

// The fakes keep their live sandboxes and, beside them, records that
// outlive the sandboxes (what a test observes), both under one mutex of
// the server's. These helpers are the operations every fake repeats.

// SortedKeys lists the keys of m, sorted, holding mu.
func SortedKeys[V any](mu *sync.Mutex, m map[string]V) []string {
	mu.Lock()
	defer mu.Unlock()
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Remove takes id out of live, holding mu, and marks its record ended with
// why; it reports whether id was live.
func Remove[S any, R any](mu *sync.Mutex, live map[string]S, records map[string]*R, id string, ended func(*R)) (S, bool) {
	mu.Lock()
	defer mu.Unlock()
	sb, ok := live[id]
	if ok {
		delete(live, id)
		if r := records[id]; r != nil {
			ended(r)
		}
	}
	return sb, ok
}

// Update runs f on the record of id, if there is one, holding mu.
func Update[R any](mu *sync.Mutex, records map[string]*R, id string, f func(*R)) {
	mu.Lock()
	defer mu.Unlock()
	if r := records[id]; r != nil {
		f(r)
	}
}

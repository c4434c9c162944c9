package egress

import (
	"slices"
	"sync"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// MaxDestinations is how many distinct destinations a Record lists; attempts
// to others are counted in the total only. It bounds the observer's memory
// whatever the sandbox sends.
const MaxDestinations = 32

type destKey struct {
	kind  string
	name  string
	addr  [16]byte
	port  uint16
	proto uint8
}

// Record counts a sandbox's blocked egress attempts and keeps the first
// MaxDestinations distinct destinations. It is safe for concurrent use.
type Record struct {
	mu    sync.Mutex
	total int64
	index map[destKey]int
	list  []model.BlockedDestination
}

// NewRecord returns an empty record.
func NewRecord() *Record {
	return &Record{index: make(map[destKey]int, MaxDestinations)}
}

// Add counts one attempt. A tls or http attempt names a TCP attempt already
// counted: it is listed, not counted again in the total.
func (r *Record) Add(a Attempt) {
	k := destKey{kind: a.Kind, name: a.Name, port: a.Port, proto: a.Proto}
	if a.Kind != model.EgressKindDNS {
		k.addr = a.Dst.As16()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if a.Kind != model.EgressKindTLS && a.Kind != model.EgressKindHTTP {
		r.total++
	}
	if i, ok := r.index[k]; ok {
		r.list[i].Count++
		return
	}
	if len(r.list) >= MaxDestinations {
		return
	}
	d := model.BlockedDestination{Kind: a.Kind, Name: a.Name, Count: 1}
	if a.Kind != model.EgressKindDNS {
		d.Address = a.Dst.Unmap().String()
		d.Port, d.Protocol = int(a.Port), int(a.Proto)
	}
	r.index[k] = len(r.list)
	r.list = append(r.list, d)
}

// Snapshot returns the total and a copy of the listed destinations, in the
// order they were first seen.
func (r *Record) Snapshot() (int64, []model.BlockedDestination) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total, slices.Clone(r.list)
}

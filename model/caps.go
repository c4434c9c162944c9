package model

import (
	"fmt"
	"strconv"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
)

// Caps are the resource caps of one sandbox. Every field always holds a value:
// a caller may raise a cap but never unset one.
type Caps struct {
	CPU      float64 `json:"cpu"`
	MemoryMB int64   `json:"memory_mb"`
	DiskMB   int64   `json:"disk_mb"`
	Pids     int64   `json:"pids"`
}

// Modest defaults, applied to every cap the caller leaves unset.
const (
	DefaultCPU      = 1.0
	DefaultMemoryMB = 512
	DefaultDiskMB   = 1024
	DefaultPids     = 256
)

// DefaultCaps returns the caps applied when the caller sets none.
func DefaultCaps() Caps {
	return Caps{CPU: DefaultCPU, MemoryMB: DefaultMemoryMB, DiskMB: DefaultDiskMB, Pids: DefaultPids}
}

// CapsRequest is what a caller asked for: nil means "use the default".
// Zero and negative values are kept so that the policy can refuse them
// rather than have them silently replaced.
type CapsRequest struct {
	CPU      *float64
	MemoryMB *int64
	DiskMB   *int64
	Pids     *int64
}

// Resolve fills every unset cap with its default.
func (r CapsRequest) Resolve() Caps {
	c := DefaultCaps()
	if r.CPU != nil {
		c.CPU = *r.CPU
	}
	if r.MemoryMB != nil {
		c.MemoryMB = *r.MemoryMB
	}
	if r.DiskMB != nil {
		c.DiskMB = *r.DiskMB
	}
	if r.Pids != nil {
		c.Pids = *r.Pids
	}
	return c
}

// Bound is the closed range [Min, Max] a cap must lie in.
type Bound struct {
	Min float64 `json:"min"`
	Max float64 `json:"max"`
}

// Contains reports whether v lies in the range. NaN lies in no range.
func (b Bound) Contains(v float64) bool { return v >= b.Min && v <= b.Max }

// Bounds holds the range of every cap.
type Bounds struct {
	CPU      Bound `json:"cpu"`
	MemoryMB Bound `json:"memory_mb"`
	DiskMB   Bound `json:"disk_mb"`
	Pids     Bound `json:"pids"`
}

// The range a cap can take on any backend, the same as cap_bounds in the
// policy bundle's capabilities/data.json (a test checks they agree). Below
// the minimum a backend cannot apply the cap: Docker refuses less than 0.01
// CPU or 6 MiB of memory, and rounds a smaller CPU value to no limit at all.
// The maximum keeps every conversion to a backend's units far from
// overflowing an int64 (memory in bytes, disk in KiB, CPU in billionths);
// pids stops at Linux's PID_MAX_LIMIT.
const (
	MinCPU      = 0.01
	MaxCPU      = 1024
	MinMemoryMB = 6
	MaxMemoryMB = 16 << 20 // 16 TiB
	MinDiskMB   = 1
	MaxDiskMB   = 1 << 30 // 1 PiB
	MinPids     = 1
	MaxPids     = 4 << 20
)

// CapBounds returns the range of every cap.
func CapBounds() Bounds {
	return Bounds{
		CPU:      Bound{MinCPU, MaxCPU},
		MemoryMB: Bound{MinMemoryMB, MaxMemoryMB},
		DiskMB:   Bound{MinDiskMB, MaxDiskMB},
		Pids:     Bound{MinPids, MaxPids},
	}
}

// CheckBounds refuses the first cap outside its range in b (SBX-RES-001),
// and a cap that is zero or negative (SBX-RES-001): such a value would be
// rounded to "no limit", overflow when converted to the backend's units, or
// be refused by the backend only after the request was sent. It returns nil
// when every cap is in range.
func (c Caps) CheckBounds(b Bounds) error {
	for _, f := range []struct {
		name  string
		value float64
		shown string
		bound Bound
	}{
		{"cpu", c.CPU, fmt.Sprintf("%g", c.CPU), b.CPU},
		{"memory_mb", float64(c.MemoryMB), fmt.Sprint(c.MemoryMB), b.MemoryMB},
		{"disk_mb", float64(c.DiskMB), fmt.Sprint(c.DiskMB), b.DiskMB},
		{"pids", float64(c.Pids), fmt.Sprint(c.Pids), b.Pids},
	} {
		if f.bound.Contains(f.value) {
			continue
		}
		attr := "resources." + f.name
		if f.value <= 0 {
			return &Error{Class: ErrConfiguration, Rule: rules.ResCap, Attribute: attr,
				Message: fmt.Sprintf("%s is %s: every cap must be positive, because a cap can be raised but never removed", attr, f.shown),
				Fix:     "set the cap to a positive number, or leave it out (null) to get the modest default"}
		}
		side, limit := "maximum", f.bound.Max
		if !(f.value > f.bound.Min) {
			side, limit = "minimum", f.bound.Min
		}
		return &Error{Class: ErrConfiguration, Rule: rules.ResCap, Attribute: attr,
			Message: fmt.Sprintf("%s = %s is outside the range a backend can apply: the %s is %s", attr, f.shown, side, number(limit)),
			Fix:     fmt.Sprintf("set %s between %s and %s", attr, number(f.bound.Min), number(f.bound.Max))}
	}
	return nil
}

// number formats a bound without an exponent: 16777216, not 1.6777216e+07.
func number(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

package model

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

// IsDefault reports whether every cap holds its default value.
func (c Caps) IsDefault() bool { return c == DefaultCaps() }

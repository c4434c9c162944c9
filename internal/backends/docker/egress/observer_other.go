//go:build !linux

package egress

import "errors"

// Interface is the observer's device as the sandbox sees it.
const Interface = "egress0"

// Observer is not available off Linux: Attach always fails.
type Observer struct{ IPv6 bool }

// Attach fails: the observer needs Linux network namespaces and TUN.
func Attach(pid int, id string) (*Observer, error) {
	return nil, errors.New("egress observer: needs Linux")
}

func (o *Observer) Record() *Record       { return NewRecord() }
func (o *Observer) Close()                {}
func (o *Observer) Done() <-chan struct{} { return nil }

//go:build !linux

package egress

import "errors"

// Gateway is not available off Linux: AttachGateway always fails, so a
// sandbox that needs it is never opened (fail closed).
type Gateway struct{ IPv6 bool }

// AttachGateway fails: the gateway needs Linux network namespaces and TUN.
func AttachGateway(pid int, containerID string, cfg GatewayConfig) (*Gateway, error) {
	return nil, errors.New("egress gateway: needs Linux")
}

func (g *Gateway) Record() *Record          { return NewRecord() }
func (g *Gateway) Allowed() AllowedSnapshot { return AllowedSnapshot{} }
func (g *Gateway) Close()                   {}
func (g *Gateway) Done() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

package egress

import (
	"bytes"
	"encoding/binary"
	"strings"

	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// namedPort reports whether a TCP port is one where the client speaks first
// and names the host it wants in its first bytes (HTTP's Host, TLS's server
// name). There the observer completes the handshake, statelessly, to read
// that name, then resets the connection; elsewhere it resets the SYN, so a
// client of a protocol where the server speaks first fails at once instead
// of waiting for a greeting that never comes.
func namedPort(port uint16) bool {
	switch port {
	case 80, 443, 8000, 8080, 8443:
		return true
	}
	return false
}

// connName is the name a client's first bytes on a connection ask for: the
// TLS ClientHello's server name, or the HTTP request's Host (without its
// port), escaped like a DNS name. kind is model.EgressKindTLS or
// EgressKindHTTP; ok is false when b names nothing. b is one segment: a
// name past its end is not seen (the observer keeps no state to reassemble).
func connName(b []byte) (kind, name string, ok bool) {
	if n, ok := serverName(b); ok {
		return model.EgressKindTLS, n, true
	}
	if n, ok := httpHost(b); ok {
		return model.EgressKindHTTP, n, true
	}
	return "", "", false
}

// serverName reads the server_name extension (RFC 6066 3) of a TLS
// ClientHello in a record that starts b, as far as b goes.
func serverName(b []byte) (string, bool) {
	// Record header (type 22, handshake), handshake header (type 1,
	// ClientHello), legacy version, random.
	if len(b) < 5+4+2+32 || b[0] != 22 || b[5] != 1 {
		return "", false
	}
	c := b[5+4+2+32:]
	skip := func(lenBytes int) bool {
		if len(c) < lenBytes {
			return false
		}
		n := 0
		for _, x := range c[:lenBytes] {
			n = n<<8 | int(x)
		}
		if len(c) < lenBytes+n {
			return false
		}
		c = c[lenBytes+n:]
		return true
	}
	// Session id, cipher suites, compression methods, then the extensions'
	// total length.
	if !skip(1) || !skip(2) || !skip(1) || len(c) < 2 {
		return "", false
	}
	c = c[2:]
	for len(c) >= 4 {
		typ, n := binary.BigEndian.Uint16(c[0:2]), int(binary.BigEndian.Uint16(c[2:4]))
		if len(c) < 4+n {
			return "", false
		}
		if typ == 0 { // server_name: list length, then (type 0 host_name, length, name)
			e := c[4 : 4+n]
			if len(e) < 5 || e[2] != 0 {
				return "", false
			}
			l := int(binary.BigEndian.Uint16(e[3:5]))
			if l == 0 || l > maxName || len(e) < 5+l {
				return "", false
			}
			return EscapeName(string(e[5 : 5+l])), true
		}
		c = c[4+n:]
	}
	return "", false
}

// httpMethods are the request methods whose Host the observer reads.
var httpMethods = []string{"GET ", "POST ", "PUT ", "HEAD ", "DELETE ", "PATCH ", "OPTIONS ", "CONNECT "}

// httpHost reads the Host header of an HTTP/1 request that starts b, within
// b's header lines.
func httpHost(b []byte) (string, bool) {
	isRequest := false
	for _, m := range httpMethods {
		if bytes.HasPrefix(b, []byte(m)) {
			isRequest = true
			break
		}
	}
	if !isRequest {
		return "", false
	}
	for _, line := range bytes.Split(b, []byte("\r\n"))[1:] {
		if len(line) == 0 {
			break // end of the headers
		}
		k, v, found := bytes.Cut(line, []byte(":"))
		if !found || !strings.EqualFold(string(k), "host") {
			continue
		}
		h := strings.TrimSpace(string(v))
		if strings.HasPrefix(h, "[") { // an IPv6 literal, with or without a port
			if i := strings.IndexByte(h, ']'); i > 0 {
				h = h[1:i]
			}
		} else if i := strings.LastIndexByte(h, ':'); i >= 0 {
			h = h[:i]
		}
		if h == "" || len(h) > maxName {
			return "", false
		}
		return EscapeName(h), true
	}
	return "", false
}

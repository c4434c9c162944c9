package egress

import (
	"encoding/binary"
	"strings"
)

// query is the part of a DNS query the observer keeps: the name of its
// first question, and the bytes needed to answer it.
type query struct {
	name     string
	id       [2]byte
	flags    byte   // opcode and RD of the query, copied into the answer
	question []byte // the first question as sent (name, type, class), bounded
}

// maxName is the longest name DNS allows on the wire.
const maxName = 255

// parseQuery parses a DNS query message (RFC 1035 4.1). Only a standard
// query with at least one question is one; the name of a question has no
// compression pointers (a query has nothing to point at).
func parseQuery(b []byte) (q query, ok bool) {
	if len(b) < 12 || b[2]&0x80 != 0 || (b[2]>>3)&0x0f != 0 || binary.BigEndian.Uint16(b[4:6]) == 0 {
		return q, false
	}
	copy(q.id[:], b[0:2])
	q.flags = b[2] & 0x79 // opcode and RD
	var name strings.Builder
	i, wire := 12, 0
	for {
		if i >= len(b) {
			return q, false
		}
		l := int(b[i])
		if l&0xc0 != 0 {
			return q, false
		}
		wire += l + 1
		if wire > maxName || i+1+l > len(b) {
			return q, false
		}
		if l == 0 {
			i++
			break
		}
		if name.Len() > 0 {
			name.WriteByte('.')
		}
		writeLabel(&name, b[i+1:i+1+l])
		i += 1 + l
	}
	if i+4 > len(b) {
		return q, false
	}
	q.question = b[12 : i+4]
	q.name = name.String()
	if q.name == "" {
		q.name = "."
	}
	return q, true
}

// writeLabel writes a label in lower case, escaping every byte that is not
// a letter, digit, '-' or '_' as \DDD (as DNS presentation format does), so
// that what untrusted code chose can never be mistaken for a separator, a
// quote or a terminal control sequence wherever the name is shown.
func writeLabel(w *strings.Builder, l []byte) {
	for _, c := range l {
		switch {
		case c >= 'A' && c <= 'Z':
			w.WriteByte(c + 'a' - 'A')
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
			w.WriteByte(c)
		default:
			w.WriteByte('\\')
			w.WriteByte('0' + c/100)
			w.WriteByte('0' + c/10%10)
			w.WriteByte('0' + c%10)
		}
	}
}

// refused is the answer to q: its id and question, response code REFUSED,
// no records. A resolver library then fails the lookup at once instead of
// waiting for a timeout.
func (q query) refused() []byte {
	out := make([]byte, 12, 12+len(q.question))
	copy(out[0:2], q.id[:])
	out[2] = 0x80 | q.flags // QR, the query's opcode and RD
	out[3] = 5              // RCODE REFUSED
	out[5] = 1              // one question
	return append(out, q.question...)
}

// EscapeName is s as the observer would record it in a query: each
// dot-separated label in lower case, with the bytes it escapes escaped. The
// audit log's redaction uses it to find a secret that sandboxed code put
// into a name it looked up.
func EscapeName(s string) string {
	var w strings.Builder
	for i, l := range strings.Split(s, ".") {
		if i > 0 {
			w.WriteByte('.')
		}
		writeLabel(&w, []byte(l))
	}
	return w.String()
}

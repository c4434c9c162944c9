package broker

import (
	"bytes"
	"net/http"
	"strings"
)

// pair is a value the sandbox must not see and what it sees instead.
type pair struct{ from, to []byte }

// scrubber replaces every value in a stream with its placeholder, across
// any split of the stream into reads. It holds back only a tail that could
// still become a value, never more, so a streamed event is passed on as
// soon as it cannot be the start of one.
type scrubber struct {
	pairs []pair
	first [256]bool // bytes a value can start with
	// When every value starts with the same byte (one secret, the usual
	// case), the scan jumps between its occurrences with IndexByte.
	single    bool
	firstByte byte
	carry     []byte // held back: a proper prefix of some value
	buf       []byte
}

func newScrubber(pairs []pair) *scrubber {
	s := &scrubber{pairs: pairs}
	n := 0
	for _, p := range pairs {
		if !s.first[p.from[0]] {
			n++
		}
		s.first[p.from[0]] = true
		s.firstByte = p.from[0]
	}
	s.single = n == 1
	return s
}

// push appends to dst the output that p makes certain.
func (s *scrubber) push(dst, p []byte) []byte {
	if len(s.carry) == 0 {
		return s.scan(dst, p, false)
	}
	s.buf = append(append(s.buf[:0], s.carry...), p...)
	return s.scan(dst, s.buf, false)
}

// flush appends to dst what was held back, at the end of the stream. A
// stream that ends in the first minPartial or more bytes of a value (an
// echo cut short) ends in as many bytes of its placeholder instead.
func (s *scrubber) flush(dst []byte) []byte {
	if len(s.carry) == 0 {
		return dst
	}
	if len(s.carry) >= minPartial {
		for _, p := range s.pairs {
			if len(s.carry) < len(p.from) && bytes.HasPrefix(p.from, s.carry) {
				dst = append(dst, p.to[:min(len(s.carry), len(p.to))]...)
				s.carry = s.carry[:0]
				return dst
			}
		}
	}
	s.buf = append(s.buf[:0], s.carry...)
	return s.scan(dst, s.buf, true)
}

// minPartial is the shortest start of a value that flush masks: shorter
// ones are as likely ordinary text, and public key prefixes are about
// that long.
const minPartial = 8

// scan replaces, left to right, the longest value starting at each
// position. Unless final, it stops at the first position where in's tail
// is a proper prefix of a value longer than any match there, and keeps
// that tail for the next push.
func (s *scrubber) scan(dst, in []byte, final bool) []byte {
	start := 0
	i := 0
	for i < len(in) {
		if !s.first[in[i]] {
			if !s.single {
				i++
				continue
			}
			j := bytes.IndexByte(in[i+1:], s.firstByte)
			if j < 0 {
				i = len(in)
				break
			}
			i += 1 + j
		}
		best, wait := -1, false
		for k, p := range s.pairs {
			rest := in[i:]
			switch {
			case bytes.HasPrefix(rest, p.from):
				if best < 0 || len(p.from) > len(s.pairs[best].from) {
					best = k
				}
			case !final && len(rest) < len(p.from) && bytes.HasPrefix(p.from, rest):
				wait = true
			}
		}
		if wait {
			// A value longer than the rest of in, and so longer than any
			// match here, may still complete: hold the tail.
			break
		}
		if best >= 0 {
			dst = append(dst, in[start:i]...)
			dst = append(dst, s.pairs[best].to...)
			i += len(s.pairs[best].from)
			start = i
			continue
		}
		i++
	}
	dst = append(dst, in[start:i]...)
	s.carry = append(s.carry[:0], in[i:]...)
	return dst
}

// scrubString is the scrubber on a whole string.
func scrubString(pairs []pair, v string) string {
	if !mayHold(pairs, v) {
		return v
	}
	s := newScrubber(pairs)
	out := s.flush(s.push(nil, []byte(v)))
	return string(out)
}

// scrubHeader replaces the values in a header's values, and drops a field
// whose name holds one.
func scrubHeader(pairs []pair, h http.Header) {
	for k, vs := range h {
		if scrubString(pairs, k) != k {
			delete(h, k)
			continue
		}
		for i, v := range vs {
			vs[i] = scrubString(pairs, v)
		}
	}
}

// mayHold reports whether the scrubber can change v. Every change, a whole
// value or the cut-short end flush masks, starts with a value's first
// minPartial bytes (all of it when shorter), so v without any of those
// passes unchanged; most header fields are such, and are left unscanned.
func mayHold(pairs []pair, v string) bool {
	for _, p := range pairs {
		if strings.Contains(v, string(p.from[:min(len(p.from), minPartial)])) {
			return true
		}
	}
	return false
}

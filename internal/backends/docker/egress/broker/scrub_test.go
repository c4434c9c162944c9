package broker

import (
	"bytes"
	"testing"
)

// reference is the scrubber's meaning, written the plain way: left to
// right, at each position the longest value that starts there becomes its
// placeholder, and an input that ends inside a value (by minPartial bytes
// or more) ends in the placeholder's start.
func reference(pairs []pair, in []byte) []byte {
	var out []byte
	for i := 0; i < len(in); {
		best := -1
		for k, p := range pairs {
			if bytes.HasPrefix(in[i:], p.from) && (best < 0 || len(p.from) > len(pairs[best].from)) {
				best = k
			}
		}
		if best >= 0 && !longerPrefix(pairs, in[i:]) {
			out = append(out, pairs[best].to...)
			i += len(pairs[best].from)
			continue
		}
		// The input ends inside a value: its start, when long enough,
		// becomes the placeholder's start.
		if rest := in[i:]; len(rest) >= minPartial {
			for _, p := range pairs {
				if len(rest) < len(p.from) && bytes.HasPrefix(p.from, rest) {
					return append(out, p.to[:min(len(rest), len(p.to))]...)
				}
			}
		}
		if best >= 0 {
			out = append(out, pairs[best].to...)
			i += len(pairs[best].from)
			continue
		}
		out = append(out, in[i])
		i++
	}
	return out
}

// longerPrefix reports whether rest is a proper prefix of some value.
func longerPrefix(pairs []pair, rest []byte) bool {
	for _, p := range pairs {
		if len(rest) < len(p.from) && bytes.HasPrefix(p.from, rest) {
			return true
		}
	}
	return false
}

// chunked runs in through a scrubber in chunks whose sizes come from
// splits, the way reads arrive from a socket.
func chunked(pairs []pair, in, splits []byte) []byte {
	s := newScrubber(pairs)
	var out []byte
	for len(in) > 0 {
		n := len(in)
		if len(splits) > 0 {
			n = min(n, int(splits[0])%17+1)
			splits = splits[1:]
		}
		out = s.push(out, in[:n])
		in = in[n:]
	}
	return s.flush(out)
}

func TestScrubSplits(t *testing.T) {
	pairs := []pair{{from: []byte(canary), to: []byte("PLACEHOLDER")}}
	in := []byte("a" + canary + "b" + canary[:10] + "x" + canary + canary)
	want := reference(pairs, in)
	if bytes.Contains(want, []byte(canary)) {
		t.Fatal("reference kept the value")
	}
	for step := 1; step <= len(in); step++ {
		s := newScrubber(pairs)
		var out []byte
		for i := 0; i < len(in); i += step {
			out = s.push(out, in[i:min(i+step, len(in))])
		}
		out = s.flush(out)
		if !bytes.Equal(out, want) {
			t.Fatalf("step %d: %q, want %q", step, out, want)
		}
	}
	// A stream that ends in the middle of a possible value holds back only
	// that possible prefix, nothing before it.
	s := newScrubber(pairs)
	if got := s.push(nil, []byte("data: x\n\n"+canary[:5])); string(got) != "data: x\n\n" {
		t.Errorf("held back %q", got)
	}
	if got := s.push(nil, []byte("data: y\n\n")); string(got) != canary[:5]+"data: y\n\n" {
		t.Errorf("released %q", got)
	}
	// An echo cut short inside the value ends in the placeholder's start.
	s = newScrubber(pairs)
	if got := s.flush(s.push(nil, []byte("key: "+canary[:20]))); string(got) != "key: PLACEHOLDER"[:5+11] {
		t.Errorf("a cut echo came out as %q", got)
	}
}

// FuzzScrub: for any values, input and chunking, the streamed output is the
// reference output, and it holds no value unless the value could be made
// of a placeholder and the bytes around it (placeholders here are
// made of bytes 0 and 1; the check skips inputs holding those).
func FuzzScrub(f *testing.F) {
	f.Add([]byte(canary), []byte("sk-CANARY"), []byte("x"+canary+"y"), []byte{3, 1, 4, 1, 5, 9, 2, 6})
	f.Add([]byte("abab"), []byte("ab"), []byte("abababab"), []byte{1})
	f.Add([]byte("aaaaaaaa"), []byte("aaaab"), []byte("aaaaaaaaab"), []byte{0, 0, 7})
	f.Fuzz(func(t *testing.T, v1, v2, in, splits []byte) {
		if len(v1) == 0 || len(v2) == 0 || len(v1) > 64 || len(v2) > 64 || len(in) > 4096 {
			return
		}
		pairs := []pair{{from: v1, to: []byte{0, 0}}, {from: v2, to: []byte{0, 1, 0}}}
		want := reference(pairs, in)
		got := chunked(pairs, in, splits)
		if !bytes.Equal(got, want) {
			t.Fatalf("streamed %q, want %q", got, want)
		}
		// scrubString skips what mayHold says cannot change: it must
		// still be the whole scrubber's answer.
		whole := newScrubber(pairs)
		if s, w := scrubString(pairs, string(in)), string(whole.flush(whole.push(nil, in))); s != w {
			t.Fatalf("scrubString gave %q, the scrubber %q", s, w)
		}
		for _, p := range pairs {
			if !bytes.ContainsAny(p.from, "\x00\x01") && !bytes.ContainsAny(in, "\x00\x01") && !bordered(pairs) && bytes.Contains(got, p.from) {
				t.Fatalf("value %q survived in %q", p.from, got)
			}
		}
	})
}

// bordered reports whether a value overlaps itself or another value, where
// replacing one occurrence can leave a shifted one behind.
func bordered(pairs []pair) bool {
	for _, a := range pairs {
		for _, b := range pairs {
			for k := 1; k < len(a.from); k++ {
				if bytes.HasPrefix(b.from, a.from[k:]) || bytes.Contains(b.from, a.from[k:]) && len(a.from[k:]) < len(b.from) {
					return true
				}
			}
			if len(a.from) < len(b.from) && bytes.Contains(b.from, a.from) {
				return true
			}
		}
	}
	return false
}

// BenchmarkScrub is the scrubber's cost on a text-like body, 32 KiB reads.
func BenchmarkScrub(b *testing.B) {
	pairs := []pair{{from: []byte(canary), to: []byte("PLACEHOLDER-PLACEHOLDER-PLACEHOLDER-PLACE")}}
	var text []byte
	for len(text) < 1<<20 {
		text = append(text, "data: {\"choices\":[{\"delta\":{\"content\":\"some streamed tokens, sk- not a key\"}}]}\n\n"...)
	}
	b.SetBytes(int64(len(text)))
	var out []byte
	for b.Loop() {
		s := newScrubber(pairs)
		for i := 0; i < len(text); i += 32 << 10 {
			out = s.push(out[:0], text[i:min(i+32<<10, len(text))])
		}
		out = s.flush(out[:0])
	}
}

// TestScrubStringEdges: the strings scrubString may skip unscanned end
// just short of what the scrubber would change.
func TestScrubStringEdges(t *testing.T) {
	pairs := []pair{{from: []byte(canary), to: []byte("PLACEHOLDER-PLACEHOLDER-PLACEHOLDER-PLACE")}, {from: []byte("short"), to: []byte("SHORT")}}
	for in, want := range map[string]string{
		"k=" + canary[:minPartial]:         "k=PLACEHOL",
		"k=" + canary[:minPartial-1]:       "k=" + canary[:minPartial-1],
		canary[:minPartial] + "x":          canary[:minPartial] + "x",
		"a " + canary + " b":               "a PLACEHOLDER-PLACEHOLDER-PLACEHOLDER-PLACE b",
		"a short b":                        "a SHORT b",
		"a shor":                           "a shor",
		"no value here":                    "no value here",
		canary[1:]:                         canary[1:],
		"x" + canary[:len(canary)-1] + "y": "x" + canary[:len(canary)-1] + "y",
	} {
		if got := scrubString(pairs, in); got != want {
			t.Errorf("scrubString(%q) = %q, want %q", in, got, want)
		}
	}
}

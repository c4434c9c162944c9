package mcpserver

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// captured feeds out to a capture in writes of the given sizes (cycled).
func captured(out []byte, head, tail int, sizes []int) Stream {
	s := &server{o: Options{HeadBytes: head, TailBytes: tail}}
	c := s.newCapture("/tmp/x")
	for i := 0; len(out) > 0; i++ {
		n := len(out)
		if len(sizes) > 0 {
			n = min(n, 1+sizes[i%len(sizes)]%17)
		}
		_, _ = c.Write(out[:n])
		out = out[n:]
	}
	return c.stream()
}

func sameStream(a, b Stream) bool {
	return a.Head == b.Head && a.Tail == b.Tail && a.Bytes == b.Bytes && a.Omitted == b.Omitted &&
		a.Binary == b.Binary && a.headN == b.headN && a.tailN == b.tailN
}

// A stream captured as it arrives, in writes of any size, is summarized
// exactly as the whole stream is, though only its head and tail are held.
func TestCaptureSummarizesAsTheWholeStream(t *testing.T) {
	for _, out := range []string{"", "abc", strings.Repeat("x", 100), "aé" + strings.Repeat("€", 40) + "😀z",
		"\xff" + strings.Repeat("y", 50), strings.Repeat("y", 50) + "\xe2\x82", strings.Repeat("é", 33)} {
		for _, sizes := range [][]int{nil, {0}, {2}, {5, 0, 9}} {
			want, got := summarize([]byte(out), 8, 8), captured([]byte(out), 8, 8, sizes)
			if !sameStream(want, got) {
				t.Errorf("%q in writes %v: %+v, want %+v", out, sizes, got, want)
			}
		}
	}
}

func FuzzCapture(f *testing.F) {
	f.Add([]byte("hello world, this is longer than both"), 2, 3, []byte{1, 5})
	f.Add([]byte("aé€😀z"+strings.Repeat("€", 9)), 1, 1, []byte{0})
	f.Add([]byte{0xff, 0xf0, 0x9f, 0x98, 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k'}, 1, 2, []byte{2})
	f.Fuzz(func(t *testing.T, out []byte, head, tail int, sz []byte) {
		head, tail = 1+abs(head)%16, 1+abs(tail)%16
		sizes := make([]int, len(sz))
		for i, b := range sz {
			sizes[i] = int(b)
		}
		want, got := summarize(out, head, tail), captured(out, head, tail, sizes)
		if !sameStream(want, got) {
			t.Fatalf("%q (head %d, tail %d, writes %v): %+v, want %+v", out, head, tail, sizes, got, want)
		}
		if !utf8.ValidString(got.Head) || !utf8.ValidString(got.Tail) {
			t.Fatal("not valid UTF-8")
		}
	})
}

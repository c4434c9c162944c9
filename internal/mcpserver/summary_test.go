package mcpserver

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		name               string
		out                string
		head, tail         int
		wantHead, wantTail string
		omitted            int
	}{
		{"empty", "", 4, 4, "", "", 0},
		{"fits", "abcdefgh", 4, 4, "abcdefgh", "", 0},
		{"cut", "abcdefghij", 4, 4, "abcd", "ghij", 2},
		// é is 2 bytes, € 3: a cut never splits a character.
		{"utf8 head", "aé" + strings.Repeat("x", 10) + "z", 2, 2, "a", "xz", 11},
		{"utf8 tail", "ab" + strings.Repeat("x", 10) + "€z", 2, 3, "ab", "z", 13},
	} {
		s := summarize([]byte(tc.out), tc.head, tc.tail)
		if s.Head != tc.wantHead || s.Tail != tc.wantTail || s.Omitted != tc.omitted || s.Bytes != len(tc.out) {
			t.Errorf("%s: head %q tail %q omitted %d bytes %d; want %q %q %d %d", tc.name, s.Head, s.Tail, s.Omitted, s.Bytes,
				tc.wantHead, tc.wantTail, tc.omitted, len(tc.out))
		}
		if s.headN+s.Omitted+s.tailN != s.Bytes {
			t.Errorf("%s: %d + %d + %d bytes do not add up to %d", tc.name, s.headN, s.Omitted, s.tailN, s.Bytes)
		}
	}
}

// Binary output is marked, shown with replacement characters, and its
// counts are still the stream's bytes.
func TestSummarizeBinary(t *testing.T) {
	out := append([]byte{0xff, 0xfe}, []byte(strings.Repeat("y", 100))...)
	s := summarize(out, 10, 10)
	if !s.Binary || !utf8.ValidString(s.Head) || !strings.HasPrefix(s.Head, "\uFFFD") || s.Bytes != 102 || s.headN != 10 || s.Omitted != 82 {
		t.Errorf("binary: %+v", s)
	}
}

func TestRender(t *testing.T) {
	var b strings.Builder
	s := summarize([]byte(strings.Repeat("a", 10)+strings.Repeat("b", 10)), 4, 4)
	s.Path = "/tmp/sandboxio-mcp/0001-run.stdout"
	s.render(&b, "stdout")
	want := "stdout (20 bytes; first 4 and last 4 shown, 12 omitted; the full output is in /tmp/sandboxio-mcp/0001-run.stdout in the sandbox (read_file)):\naaaa\n[… 12 bytes omitted …]\nbbbb\n"
	if b.String() != want {
		t.Errorf("render:\n%q\nwant\n%q", b.String(), want)
	}
	b.Reset()
	summarize(nil, 4, 4).render(&b, "stderr")
	if b.String() != "stderr: empty\n" {
		t.Errorf("empty: %q", b.String())
	}
}

// FuzzSummarize: any output (a command prints what it likes) is cut without
// a panic into valid UTF-8 whose parts add up to the stream, never longer
// than asked (a character is never split, so a part may be up to 3 bytes
// shorter).
func FuzzSummarize(f *testing.F) {
	f.Add([]byte("hello"), 2, 2)
	f.Add([]byte("aé€😀z"), 1, 1)
	f.Add([]byte{0xff, 0xf0, 0x9f, 0x98}, 1, 2)
	f.Fuzz(func(t *testing.T, out []byte, head, tail int) {
		head, tail = 1+abs(head)%64, 1+abs(tail)%64
		s := summarize(out, head, tail)
		if !utf8.ValidString(s.Head) || !utf8.ValidString(s.Tail) {
			t.Fatalf("not valid UTF-8: %q %q", s.Head, s.Tail)
		}
		if s.headN+s.Omitted+s.tailN != len(out) || s.Bytes != len(out) {
			t.Fatalf("%d + %d + %d != %d", s.headN, s.Omitted, s.tailN, len(out))
		}
		if s.Omitted > 0 && (s.headN > head || s.tailN > tail || s.headN < head-3 || s.tailN < tail-3) {
			t.Fatalf("head %d of %d, tail %d of %d", s.headN, head, s.tailN, tail)
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

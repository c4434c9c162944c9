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

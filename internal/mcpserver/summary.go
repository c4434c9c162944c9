package mcpserver

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Stream is one output stream of a command as a tool result gives it to a
// model: its size, its beginning and end, and where the whole of it is kept
// in the sandbox when the result does not hold all of it.
type Stream struct {
	Bytes int    `json:"bytes"`
	Head  string `json:"head"`
	Tail  string `json:"tail,omitempty"`
	// Omitted is how many bytes between Head and Tail the result leaves
	// out; 0 when Head (and Tail) hold the whole stream.
	Omitted int `json:"omitted_bytes,omitempty"`
	// Path is the file in the sandbox that holds the whole stream (secret
	// values redacted), set when bytes were omitted; read it with read_file.
	Path string `json:"path,omitempty"`
	// KeepError says why the whole stream could not be kept in the sandbox
	// (a full disk, say); the summary is then all there is.
	KeepError string `json:"keep_error,omitempty"`
	// Binary is set when the stream is not valid UTF-8: Head and Tail then
	// hold it with each invalid byte replaced (U+FFFD).
	Binary bool `json:"binary,omitempty"`

	headN, tailN int // bytes of the stream in Head and Tail
}

// summarize cuts out up to head bytes from the start of out and up to tail
// bytes from its end, never through a valid UTF-8 character (a part is then
// up to 3 bytes shorter). A stream that fits in head+tail is given whole, in
// Head.
func summarize(out []byte, head, tail int) Stream {
	s := Stream{Bytes: len(out), Binary: !utf8.Valid(out)}
	if len(out) <= head+tail {
		s.Head, s.headN = text(out), len(out)
		return s
	}
	h, t := head, len(out)-tail
	if start, _, ok := crossing(out, h); ok {
		h = start // the character goes to the omitted part
	}
	if _, end, ok := crossing(out, t); ok {
		t = end
	}
	s.Head, s.Tail = text(out[:h]), text(out[t:])
	s.headN, s.tailN = h, len(out)-t
	s.Omitted = t - h
	return s
}

// crossing finds the valid UTF-8 character that a cut at out[at] would
// split: it starts before at and ends after it. Invalid bytes are cut
// anywhere.
func crossing(out []byte, at int) (start, end int, ok bool) {
	for p := at - 1; p >= 0 && p > at-utf8.UTFMax; p-- {
		if !utf8.RuneStart(out[p]) {
			continue
		}
		r, size := utf8.DecodeRune(out[p:])
		if (r != utf8.RuneError || size > 1) && p+size > at {
			return p, p + size, true
		}
		return 0, 0, false
	}
	return 0, 0, false
}

func text(b []byte) string { return strings.ToValidUTF8(string(b), "\uFFFD") }

// render writes one stream as the text a model reads.
func (s Stream) render(b *strings.Builder, name string) {
	switch {
	case s.Bytes == 0:
		fmt.Fprintf(b, "%s: empty\n", name)
		return
	case s.Omitted == 0:
		fmt.Fprintf(b, "%s (%d bytes):\n", name, s.Bytes)
		b.WriteString(s.Head)
	default:
		where := "the full output is in " + s.Path + " in the sandbox (read_file)"
		if s.Path == "" {
			where = "the full output could not be kept in the sandbox: " + s.KeepError
		}
		fmt.Fprintf(b, "%s (%d bytes; first %d and last %d shown, %d omitted; %s):\n",
			name, s.Bytes, s.headN, s.tailN, s.Omitted, where)
		b.WriteString(s.Head)
		fmt.Fprintf(b, "\n[… %d bytes omitted …]\n", s.Omitted)
		b.WriteString(s.Tail)
	}
	if !strings.HasSuffix(b.String(), "\n") {
		b.WriteString("\n")
	}
}

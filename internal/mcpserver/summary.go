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
// bytes from its end, on UTF-8 boundaries. A stream that fits in head+tail
// is given whole, in Head.
func summarize(out []byte, head, tail int) Stream {
	s := Stream{Bytes: len(out), Binary: !utf8.Valid(out)}
	if len(out) <= head+tail {
		s.Head, s.headN = text(out), len(out)
		return s
	}
	h := runeCut(out, head)
	t := len(out) - tail
	for t < len(out) && !utf8.RuneStart(out[t]) {
		t++ // start the tail on a whole character
	}
	s.Head, s.Tail = text(out[:h]), text(out[t:])
	s.headN, s.tailN = h, len(out)-t
	s.Omitted = t - h
	return s
}

// runeCut returns the largest n <= max such that out[:n] does not end in the
// middle of a UTF-8 sequence (at most 3 bytes short of max).
func runeCut(out []byte, max int) int {
	n := max
	for i := 0; i < utf8.UTFMax && n > 0 && n < len(out); i++ {
		if utf8.RuneStart(out[n]) {
			return n
		}
		n--
	}
	if n < len(out) && !utf8.RuneStart(out[n]) {
		return max // not UTF-8 here: cut at the byte
	}
	return n
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

package mcpserver

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"unicode/utf8"
)

// KeepChunkBytes is how much of a stream the server holds in memory
// beyond its head and tail (see capture); it is also the size of the
// parts a long stream goes into the sandbox in.
const KeepChunkBytes = 2 << 20

// joinScript joins the parts of a kept stream into the file $1 (mode
// 0600) and removes them. It runs in the sandbox, where the parts are.
const joinScript = `umask 077; d=$1; shift; cat -- "$@" >"$d" && rm -f -- "$@"`

// capture is one output stream of a call as it arrives. It keeps in memory
// what the summary needs and up to KeepChunkBytes; past that the stream goes to
// an unlinked temporary file. Once the command has ended, a stream longer than
// its summary goes into the sandbox in KeepChunkBytes parts: nothing is
// uploaded while it runs, since a second exec while the first one's output is
// unread can stall both on Docker 20.10.
type capture struct {
	s    *server
	base string // the kept file; its parts are base.partNNNN

	whole int    // a stream of up to this many bytes is held whole, in first
	first []byte // the first `whole` bytes
	last  []byte // the last tail+UTFMax bytes, circular once full
	at    int    // where the next byte goes in last, once full
	n     int

	carry   []byte // an unfinished UTF-8 sequence at the end of what arrived
	invalid bool

	chunk   []byte   // what is not in spill
	spill   *os.File // the stream past the first chunk, unlinked
	spilled int64
	parts   []string // uploaded into the sandbox
	keepErr error
}

func (s *server) newCapture(base string) *capture {
	// Beyond head+tail, UTFMax bytes on each side let summarize move a cut
	// off a character, as it does on the whole stream.
	whole := s.o.HeadBytes + s.o.TailBytes + 2*utf8.UTFMax
	return &capture{s: s, base: base, whole: whole}
}

func (c *capture) Write(p []byte) (int, error) {
	c.n += len(p)
	c.validate(p)
	if room := c.whole - len(c.first); room > 0 {
		c.first = append(c.first, p[:min(room, len(p))]...)
	}
	c.remember(p)
	for q := p; len(q) > 0 && c.keepErr == nil; {
		take := min(len(q), max(KeepChunkBytes, c.whole)-len(c.chunk))
		c.chunk = append(c.chunk, q[:take]...)
		q = q[take:]
		if len(c.chunk) >= max(KeepChunkBytes, c.whole) {
			c.toSpill()
		}
	}
	// A stream that could not be kept does not stop the command: the
	// summary is still right, and the result says the stream was not kept.
	return len(p), nil
}

// remember keeps the last tail+UTFMax bytes.
func (c *capture) remember(p []byte) {
	size := c.s.o.TailBytes + utf8.UTFMax
	if len(p) >= size {
		c.last = append(c.last[:0], p[len(p)-size:]...)
		c.at = 0
		return
	}
	if len(c.last) < size {
		room := size - len(c.last)
		c.last = append(c.last, p[:min(room, len(p))]...)
		p = p[min(room, len(p)):]
	}
	for len(p) > 0 {
		n := copy(c.last[c.at:], p)
		c.at = (c.at + n) % size
		p = p[n:]
	}
}

// tailBytes returns the last bytes in order.
func (c *capture) tailBytes() []byte {
	out := make([]byte, 0, len(c.last))
	return append(append(out, c.last[c.at:]...), c.last[:c.at]...)
}

// validate follows whether the stream is valid UTF-8 across writes.
func (c *capture) validate(p []byte) {
	if c.invalid {
		return
	}
	if len(c.carry) > 0 {
		need := min(len(p), utf8.UTFMax-len(c.carry))
		joined := append(append([]byte{}, c.carry...), p[:need]...)
		if !utf8.FullRune(joined) {
			c.carry = joined
			return
		}
		r, size := utf8.DecodeRune(joined)
		if r == utf8.RuneError && size <= 1 {
			c.invalid = true
			return
		}
		p = p[size-len(c.carry):]
		c.carry = nil
	}
	// An unfinished sequence at the end waits for the next write.
	cut := len(p)
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(p[i]) {
			if !utf8.FullRune(p[i:]) {
				cut = i
			}
			break
		}
	}
	if !utf8.Valid(p[:cut]) {
		c.invalid = true
		return
	}
	c.carry = append(c.carry[:0], p[cut:]...)
}

// toSpill moves the held chunk to the spill file.
func (c *capture) toSpill() {
	if len(c.chunk) == 0 || c.keepErr != nil {
		return
	}
	if c.spill == nil {
		f, err := os.CreateTemp("", "sandboxio-mcp-*")
		if err != nil {
			c.fail(fmt.Errorf("the server could not hold the stream: %w", err))
			return
		}
		// Unlinked at once: only this open file holds it.
		_ = os.Remove(f.Name())
		c.spill = f
	}
	// The sandbox redacted the stream already; this is the server's own
	// pass, as on every string it returns.
	n, err := c.spill.Write(c.s.o.Secrets.Redact(c.chunk))
	c.spilled += int64(n)
	if err != nil {
		c.fail(fmt.Errorf("the server could not hold the stream: %w", err))
		return
	}
	c.chunk = c.chunk[:0]
}

// fail gives up keeping the stream.
func (c *capture) fail(err error) {
	c.keepErr, c.chunk = err, nil
	c.close()
}

// close lets the spill file go.
func (c *capture) close() {
	if c.spill != nil {
		_ = c.spill.Close()
		c.spill = nil
	}
}

// stream is the summary of the whole stream.
func (c *capture) stream() Stream {
	head, tail := c.s.o.HeadBytes, c.s.o.TailBytes
	var st Stream
	if c.n <= c.whole {
		st = summarize(c.first, head, tail)
	} else {
		// The first and last bytes stand for the stream: summarize cuts
		// them as it would cut the whole.
		part := append(append([]byte{}, c.first[:head+utf8.UTFMax]...), c.tailBytes()...)
		st = summarize(part, head, tail)
		st.Bytes, st.Omitted = c.n, st.Omitted+c.n-len(part)
	}
	st.Binary = c.invalid || len(c.carry) > 0
	return st
}

// keep puts the whole stream into the sandbox as the file base, and
// returns why it could not.
func (c *capture) keep(ctx context.Context) error {
	defer c.close()
	if c.keepErr == nil && c.spill == nil {
		data := c.s.o.Secrets.Redact(c.chunk)
		c.chunk = nil
		return c.s.o.Sandbox.Upload(ctx, c.base, data, 0o600)
	}
	c.toSpill()
	if c.keepErr != nil {
		return c.keepErr
	}
	buf := make([]byte, KeepChunkBytes)
	for off := int64(0); off < c.spilled; off += int64(len(buf)) {
		n, err := c.spill.ReadAt(buf, off)
		if n == 0 && err != nil {
			c.discard(ctx)
			return fmt.Errorf("the server could not read back the stream: %w", err)
		}
		part := fmt.Sprintf("%s.part%04d", c.base, len(c.parts))
		if err := c.s.o.Sandbox.Upload(ctx, part, buf[:n], 0o600); err != nil {
			c.discard(ctx)
			return err
		}
		c.parts = append(c.parts, part)
	}
	res, err := c.s.o.Sandbox.Run(ctx, append([]string{"sh", "-c", joinScript, "sandboxio-keep", c.base}, c.parts...), c.s.callOptions(0, "/", nil))
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("joining its %d parts in the sandbox exited %d: %s", len(c.parts), res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	if err != nil {
		c.discard(ctx)
		return err
	}
	c.parts = nil
	return nil
}

// discard lets the stream go: the spill file, and the parts already in
// the sandbox, which would fill its disk.
func (c *capture) discard(ctx context.Context) {
	c.chunk = nil
	c.close()
	if len(c.parts) == 0 {
		return
	}
	_, _ = c.s.o.Sandbox.Run(ctx, append([]string{"rm", "-f", "--"}, c.parts...), c.s.callOptions(0, "/", nil))
	c.parts = nil
}

// keptPath is the file in the sandbox that keeps stream name of call n.
func (s *server) keptPath(n int64, op, name string) string {
	return path.Join(s.o.OutputDir, fmt.Sprintf("%04d-%s.%s", n, op, name))
}

var _ io.Writer = (*capture)(nil)

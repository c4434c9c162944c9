package sandbox

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// A secret value is redacted from a stream however the writes cut it, and
// what cannot begin a value is passed on at once.
func TestStreamWriter_RedactsAcrossWrites(t *testing.T) {
	const a, b = "sk-live-0123456789", "hunter2-hunter2"
	secrets := NewSecrets(map[string]string{"A": a, "B": b})
	text := "start " + a + " mid " + b + b + " s" + a[:5] + " end " + a
	want := strings.NewReplacer(a, Redacted, b, Redacted).Replace(text)
	for cut1 := 0; cut1 <= len(text); cut1++ {
		for _, cut2 := range []int{cut1, cut1 + 1, cut1 + 7, len(text)} {
			cut2 = min(cut2, len(text))
			var out bytes.Buffer
			w := newStreamWriter(&out, secrets)
			for _, part := range []string{text[:cut1], text[cut1:cut2], text[cut2:]} {
				if n, err := w.Write([]byte(part)); err != nil || n != len(part) {
					t.Fatalf("write: %d %v", n, err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if out.String() != want {
				t.Fatalf("cut at %d and %d:\n got %q\nwant %q", cut1, cut2, out.String(), want)
			}
		}
	}

	// Byte by byte, too.
	var out bytes.Buffer
	w := newStreamWriter(&out, secrets)
	for i := range len(text) {
		_, _ = w.Write([]byte{text[i]})
	}
	_ = w.Close()
	if out.String() != want {
		t.Fatalf("byte by byte:\n got %q\nwant %q", out.String(), want)
	}

	// Only what could begin a value waits: a line that cannot is out at
	// once, before the command prints anything more.
	out.Reset()
	w = newStreamWriter(&out, secrets)
	_, _ = w.Write([]byte("first line\n"))
	if out.String() != "first line\n" {
		t.Fatalf("held back without cause: %q", out.String())
	}
	_, _ = w.Write([]byte("x sk-li"))
	if out.String() != "first line\nx " {
		t.Fatalf("a possible beginning of a value was let through: %q", out.String())
	}
	_ = w.Close()
	if out.String() != "first line\nx sk-li" {
		t.Fatalf("held-back end not written at Close: %q", out.String())
	}
	// After Close nothing more gets through.
	_, _ = w.Write([]byte(a))
	if out.String() != "first line\nx sk-li" {
		t.Fatalf("write after Close: %q", out.String())
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestStreamWriter_PassesTheSinkErrorOn(t *testing.T) {
	for _, secrets := range []Secrets{{}, NewSecrets(map[string]string{"A": "0123456789"})} {
		w := newStreamWriter(failingWriter{}, secrets)
		if _, err := w.Write([]byte("hello\n")); err == nil || !strings.Contains(err.Error(), "broken pipe") {
			t.Fatalf("want the sink's error, got %v", err)
		}
	}
}

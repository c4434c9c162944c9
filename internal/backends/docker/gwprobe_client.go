package docker

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// probeProto is the first argument of the init binary run as the egress
// gateway's probe client inside a probe sandbox (exec'd, never PID 1). The
// binary is the one already mounted as the init, so the probe needs nothing
// in the image.
const probeProto = "sandboxio-egress-probe-v1"

// probeStep is one check of the probe client: kind dns, tcp, http, tls,
// https (a request over TLS), udp, or flood (NAME connections at once),
// a target (a DNS server or an address and port) and a name (asked for, or
// sent as Host or server name).
type probeStep struct{ kind, target, name string }

func (s probeStep) String() string { return s.kind + "|" + s.target + "|" + s.name }

func parseProbeStep(a string) (probeStep, error) {
	parts := strings.Split(a, "|")
	if len(parts) != 3 {
		return probeStep{}, fmt.Errorf("probe step %q: want KIND|TARGET|NAME", a)
	}
	return probeStep{parts[0], parts[1], parts[2]}, nil
}

// probeStepTimeout bounds each step; a step that times out is reported as
// such, never as reached.
const probeStepTimeout = 3 * time.Second

// probeMain runs the steps in order and prints one line per step: the step,
// " => ", and its outcome. It never exits non-zero for a refused step: the
// backend judges the outcomes.
func probeMain(args []string) int {
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	for _, a := range args {
		s, err := parseProbeStep(a)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fmt.Fprintf(w, "%s => %s\n", s, runProbeStep(s))
	}
	return 0
}

func runProbeStep(s probeStep) string {
	switch s.kind {
	case "dns":
		return probeDNS(s.target, s.name)
	case "tcp":
		c, err := net.DialTimeout("tcp", s.target, probeStepTimeout)
		if err != nil {
			return outcomeOf(err)
		}
		c.Close()
		return "connected"
	case "http":
		return probeHTTP(s.target, s.name)
	case "tls":
		return probeTLS(s.target, s.name)
	case "https":
		return probeHTTPS(s.target, s.name)
	case "udp":
		return probeUDP(s.target)
	case "flood":
		return probeFlood(s.target, s.name)
	}
	return "error: unknown step"
}

// maxFlood bounds a flood step's connections.
const maxFlood = 2000

// probeFlood opens n TCP connections to target at once and holds those
// that connect until every attempt has ended: "opened=K failed=M".
func probeFlood(target, count string) string {
	var n int
	if _, err := fmt.Sscanf(count, "%d", &n); err != nil || n < 1 || n > maxFlood {
		return "error: flood count"
	}
	results := make(chan net.Conn, n)
	for range n {
		go func() {
			c, err := net.DialTimeout("tcp", target, probeStepTimeout)
			if err != nil {
				c = nil
			}
			results <- c
		}()
	}
	opened := 0
	var held []net.Conn
	for range n {
		if c := <-results; c != nil {
			opened++
			held = append(held, c)
		}
	}
	for _, c := range held {
		c.Close()
	}
	return fmt.Sprintf("opened=%d failed=%d", opened, n-opened)
}

// probeDNS asks server (an address and port) for the A records of name.
func probeDNS(server, name string) string {
	q, err := dnsQuery(name)
	if err != nil {
		return "error: " + err.Error()
	}
	c, err := net.DialTimeout("udp", server, probeStepTimeout)
	if err != nil {
		return outcomeOf(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(probeStepTimeout))
	if _, err := c.Write(q); err != nil {
		return outcomeOf(err)
	}
	buf := make([]byte, 1500)
	n, err := c.Read(buf)
	if err != nil {
		return outcomeOf(err)
	}
	var p dnsmessage.Parser
	h, err := p.Start(buf[:n])
	if err != nil {
		return "error: unparsed answer"
	}
	if h.RCode != dnsmessage.RCodeSuccess {
		return "rcode " + strings.ToLower(h.RCode.String())
	}
	if err := p.SkipAllQuestions(); err != nil {
		return "error: unparsed answer"
	}
	var addrs []string
	for {
		rh, err := p.AnswerHeader()
		if err != nil {
			break
		}
		if rh.Type != dnsmessage.TypeA {
			_ = p.SkipAnswer()
			continue
		}
		r, err := p.AResource()
		if err != nil {
			break
		}
		addrs = append(addrs, netip.AddrFrom4(r.A).String())
	}
	if len(addrs) == 0 {
		return "no address"
	}
	return "address " + strings.Join(addrs, ",")
}

func dnsQuery(name string) ([]byte, error) {
	n, err := dnsmessage.NewName(name + ".")
	if err != nil {
		return nil, err
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 0x5b0e, RecursionDesired: true})
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(dnsmessage.Question{Name: n, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}); err != nil {
		return nil, err
	}
	return b.Finish()
}

// probeHTTP sends a GET with Host name to target and reports the status
// line and the first line of the body.
func probeHTTP(target, name string) string {
	c, err := net.DialTimeout("tcp", target, probeStepTimeout)
	if err != nil {
		return outcomeOf(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(probeStepTimeout))
	if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", name); err != nil {
		return outcomeOf(err)
	}
	return firstLines(c)
}

// probeTLS makes a TLS handshake with server name name to target (the
// certificate is not verified: the backend knows which server it dialled
// by what it answers) and reports the first line the server writes.
func probeTLS(target, name string) string {
	d := &net.Dialer{Timeout: probeStepTimeout}
	c, err := tls.DialWithDialer(d, "tcp", target, &tls.Config{ServerName: name, InsecureSkipVerify: true}) //nolint:gosec // the probe reads which server answered, not whether to trust it
	if err != nil {
		return outcomeOf(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(probeStepTimeout))
	return firstLines(c)
}

// firstLines reads at most 4 KiB and returns the first line, and the first
// body line of an HTTP answer, joined by " / ".
// probeHTTPS sends a request over TLS: name is the server name, or
// "SNI>HOST" for a Host header that differs from it.
func probeHTTPS(target, name string) string {
	sni, host, ok := strings.Cut(name, ">")
	if !ok {
		host = sni
	}
	d := &net.Dialer{Timeout: probeStepTimeout}
	c, err := tls.DialWithDialer(d, "tcp", target, &tls.Config{ServerName: sni, InsecureSkipVerify: true}) //nolint:gosec // as in probeTLS
	if err != nil {
		return outcomeOf(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(probeStepTimeout))
	if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host); err != nil {
		return outcomeOf(err)
	}
	return firstLines(c)
}

// probeUDP sends one datagram shaped like a QUIC Initial and waits for
// any answer.
func probeUDP(target string) string {
	c, err := net.DialTimeout("udp", target, probeStepTimeout)
	if err != nil {
		return outcomeOf(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(probeStepTimeout))
	if _, err := c.Write(append([]byte{0xc3, 0, 0, 0, 1}, make([]byte, 1200)...)); err != nil {
		return outcomeOf(err)
	}
	if _, err := c.Read(make([]byte, 64)); err != nil {
		return outcomeOf(err)
	}
	return "answer"
}

func firstLines(r io.Reader) string {
	b, err := io.ReadAll(io.LimitReader(r, 4096))
	if len(b) == 0 {
		if err == nil {
			return "closed"
		}
		return outcomeOf(err)
	}
	s := string(b)
	first, _, _ := strings.Cut(s, "\r\n")
	if _, body, ok := strings.Cut(s, "\r\n\r\n"); ok {
		line, _, _ := strings.Cut(body, "\n")
		return "answer " + first + " / " + strings.TrimSpace(line)
	}
	return "answer " + strings.TrimSpace(first)
}

// outcomeOf names a failure by its errno where there is one.
func outcomeOf(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "reset"
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH):
		return "unreachable"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF):
		return "closed"
	}
	return "error: " + err.Error()
}

// Command egressprobe runs in a test sandbox (built static, so it needs nothing
// in the image) and tries what its arguments name, printing "ok" or the errno:
//
//	tcp:HOST:PORT     connect (HOST may be a name, resolved by Go's resolver)
//	udp:IP:PORT       send one datagram
//	dns:NAME          look the name up
//	tls:IP:PORT:NAME  a TLS handshake asking for the server name NAME
//	http:IP:PORT:NAME an HTTP request with Host NAME (IP in brackets if IPv6)
//	flood:N           N connects to distinct 10/8 addresses, 16 at a time
//	h1:M|URL|H=V;H=V|BODY  an HTTPS request over HTTP/1.1 (h2: over HTTP/2),
//	                  trusting the system's roots (so SSL_CERT_FILE), never a
//	                  proxy, following no redirect; $NAME expands from the
//	                  environment. Prints the status, Location, when the
//	                  body's first and last bytes came, and the body.
//	raw:IP:PORT|SNI|BYTES  BYTES (Go-quoted, $NAME expanded) over TLS to
//	                  SNI, verified; prints what came back
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	for _, a := range os.Args[1:] {
		kind, rest, _ := strings.Cut(a, ":")
		switch kind {
		case "tcp":
			c, err := net.DialTimeout("tcp", rest, 3*time.Second)
			if err == nil {
				c.Close()
			}
			fmt.Println(a, outcome(err))
		case "udp":
			c, err := net.Dial("udp", rest)
			if err == nil {
				_, err = c.Write([]byte("probe"))
				c.Close()
			}
			fmt.Println(a, outcome(err))
		case "dns":
			r := &net.Resolver{PreferGo: true}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			_, err := r.LookupHost(ctx, rest)
			cancel()
			fmt.Println(a, outcome(err))
		case "tls", "http":
			i := strings.LastIndexByte(rest, ':')
			fmt.Println(a, outcome(named(kind, rest[:i], rest[i+1:])))
		case "h1", "h2":
			fmt.Println(a, request(kind, rest))
		case "raw":
			fmt.Println(a, raw(rest))
		case "flood":
			n, _ := strconv.Atoi(rest)
			flood(n)
		default:
			fmt.Println(a, "unknown")
		}
	}
}

// named connects to addr and sends what names host first: a TLS
// ClientHello or an HTTP request; then it reads the answer.
func named(kind, addr, host string) error {
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if kind == "tls" {
		return tls.Client(c, &tls.Config{ServerName: host}).Handshake()
	}
	if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nUser-Agent: egressprobe\r\n\r\n", host); err != nil {
		return err
	}
	_, err = c.Read(make([]byte, 512))
	return err
}

func request(kind, rest string) string {
	parts := strings.SplitN(rest, "|", 4)
	if len(parts) != 4 {
		return "bad-step"
	}
	req, err := http.NewRequest(parts[0], os.ExpandEnv(parts[1]), strings.NewReader(os.ExpandEnv(parts[3])))
	if err != nil {
		return "bad-request " + err.Error()
	}
	for _, hv := range strings.Split(parts[2], ";") {
		if k, v, ok := strings.Cut(hv, "="); ok {
			req.Header.Add(k, os.ExpandEnv(v))
		}
	}
	tr := &http.Transport{Proxy: nil, ForceAttemptHTTP2: kind == "h2", TLSHandshakeTimeout: 3 * time.Second}
	if kind == "h1" {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 5 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		return "error " + err.Error()
	}
	defer resp.Body.Close()
	// The first body byte's arrival and the last's, from the headers: a
	// stream passed through as it comes has them apart.
	start := time.Now()
	var body []byte
	var first time.Duration
	buf := make([]byte, 1024)
	for len(body) < 8192 {
		n, rerr := resp.Body.Read(buf)
		if n > 0 && body == nil {
			first = time.Since(start)
		}
		body = append(body, buf[:n]...)
		if rerr != nil {
			if rerr != io.EOF {
				err = rerr
			}
			break
		}
	}
	out := fmt.Sprintf("status=%d proto=%s location=%q first_ms=%d total_ms=%d body=%q", resp.StatusCode, resp.Proto, resp.Header.Get("Location"),
		first.Milliseconds(), time.Since(start).Milliseconds(), body)
	if err != nil {
		out += " read-error " + err.Error()
	}
	return out
}

func raw(rest string) string {
	parts := strings.SplitN(rest, "|", 3)
	if len(parts) != 3 {
		return "bad-step"
	}
	payload, err := strconv.Unquote(`"` + os.ExpandEnv(parts[2]) + `"`)
	if err != nil {
		return "bad-payload"
	}
	d := &net.Dialer{Timeout: 3 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", parts[0], &tls.Config{ServerName: parts[1], NextProtos: []string{"http/1.1"}})
	if err != nil {
		return "error " + err.Error()
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(4 * time.Second))
	if _, err := io.WriteString(c, payload); err != nil {
		return "error " + err.Error()
	}
	got, err := io.ReadAll(io.LimitReader(c, 8192))
	out := fmt.Sprintf("answer=%q", got)
	if err != nil && !os.IsTimeout(err) {
		out += " read-error"
	}
	return out
}

func flood(n int) {
	var mu sync.Mutex
	counts := map[string]int{}
	work := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				addr := fmt.Sprintf("10.%d.%d.%d:5432", i>>16&255, i>>8&255, i&255)
				c, err := net.DialTimeout("tcp", addr, 3*time.Second)
				if err == nil {
					c.Close()
				}
				mu.Lock()
				counts[outcome(err)]++
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("flood %s %d\n", k, counts[k])
	}
}

func outcome(err error) string {
	var errno syscall.Errno
	var dns *net.DNSError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &errno):
		switch errno {
		case syscall.ECONNREFUSED:
			return "ECONNREFUSED"
		case syscall.ENETUNREACH:
			return "ENETUNREACH"
		case syscall.EHOSTUNREACH:
			return "EHOSTUNREACH"
		case syscall.ECONNRESET:
			return "ECONNRESET"
		case syscall.EADDRNOTAVAIL:
			return "EADDRNOTAVAIL"
		}
		return "errno-" + strconv.Itoa(int(errno))
	case errors.As(err, &dns):
		if dns.IsTimeout {
			return "dns-timeout"
		}
		return "dns-failed"
	case os.IsTimeout(err):
		return "timeout"
	}
	return "error"
}

// Command egressprobe runs in a test sandbox (built static, so it needs nothing
// in the image) and tries what its arguments name, printing "ok" or the errno:
//
//	tcp:HOST:PORT     connect (HOST may be a name, resolved by Go's resolver)
//	udp:IP:PORT       send one datagram
//	dns:NAME          look the name up
//	tls:IP:PORT:NAME  a TLS handshake asking for the server name NAME
//	http:IP:PORT:NAME an HTTP request with Host NAME (IP in brackets if IPv6)
//	flood:N           N connects to distinct 10/8 addresses, 16 at a time
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
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

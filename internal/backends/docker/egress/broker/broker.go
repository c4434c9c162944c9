// Package broker keeps a sandbox's brokered secrets out of the sandbox. The
// sandbox holds a random placeholder per secret; for that secret's hosts
// only, the egress gateway hands the connection to a Broker, which
// terminates TLS with a per-sandbox CA, writes the real value into the one
// declared header of requests to that host and scrubs the value out of
// responses. The value and the CA's key live only in this process's memory.
package broker

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/capabilities"
)

// Secret is one brokered secret.
type Secret struct {
	Name   string   // the variable name
	Hosts  []string // lower-case names; "*.example.com" matches any name below example.com
	Header string   // the request header the value goes in, e.g. "Authorization"
	Format string   // the header's value, with exactly one %s for the secret, e.g. "Bearer %s"
	Value  []byte   // the real value: only in this process's memory
}

// Request is one audit entry: which secret (empty when none was written),
// where, and the status the sandbox got. It never holds the value.
type Request struct {
	Secret string
	Host   string
	Method string
	Status int
}

const (
	// Values shorter than this would make the response scrubber rewrite
	// ordinary text; longer ones are not keys.
	minValue = 8
	maxValue = 4096
	// A placeholder is at least this long (base62, about 6 bits a
	// character), and as long as the value when that is longer, so it
	// looks like a key of the same kind to the code holding it.
	minPlaceholder = 40
	caLifetime     = 7 * 24 * time.Hour
	maxLeafs       = 256
)

// Broker brokers one sandbox's secrets. It is safe for concurrent use.
type Broker struct {
	secrets []*secret
	caCert  *x509.Certificate
	caKey   *ecdsa.PrivateKey
	caPEM   []byte
	scrub   []pair // every value and its placeholder, for responses

	mu    sync.Mutex
	leafs map[string]*tls.Certificate
}

type secret struct {
	Secret
	placeholder string
	sent        string // the header value the sandbox sends: Format with the placeholder
	real        string // the header value upstream gets: Format with the value
}

// forbiddenHeader are the header names a secret may never go in (framing,
// routing, hop-by-hop and representation headers), from the capability
// data the plan refuses them with (SBX-SEC-009), lower-case.
var forbiddenHeader = capabilities.BrokerForbiddenHeaders()

// New checks the secrets and makes the per-sandbox CA and placeholders.
// Errors name the secret, never its value.
func New(secrets []Secret) (*Broker, error) {
	if len(secrets) == 0 {
		return nil, errors.New("broker: no secrets")
	}
	b := &Broker{leafs: map[string]*tls.Certificate{}}
	names := map[string]bool{}
	var permitted []string
	for _, s := range secrets {
		if s.Name == "" || names[s.Name] {
			return nil, fmt.Errorf("broker: secret name %q empty or repeated", s.Name)
		}
		names[s.Name] = true
		if len(s.Hosts) == 0 {
			return nil, fmt.Errorf("broker: secret %s: no hosts", s.Name)
		}
		for _, h := range s.Hosts {
			base, ok := validHost(h)
			if !ok {
				return nil, fmt.Errorf("broker: secret %s: host %q is not a lower-case DNS name or *.name", s.Name, h)
			}
			permitted = append(permitted, base)
		}
		hdr := http.CanonicalHeaderKey(s.Header)
		if _, no := forbiddenHeader[strings.ToLower(s.Header)]; !httpguts.ValidHeaderFieldName(s.Header) || no || strings.HasPrefix(s.Header, ":") {
			return nil, fmt.Errorf("broker: secret %s: header %q cannot carry a secret", s.Name, s.Header)
		}
		if strings.Count(s.Format, "%") != 1 || !strings.Contains(s.Format, "%s") {
			return nil, fmt.Errorf("broker: secret %s: format must hold exactly one %%s and no other %%", s.Name)
		}
		if len(s.Value) < minValue || len(s.Value) > maxValue {
			return nil, fmt.Errorf("broker: secret %s: value must be %d to %d bytes", s.Name, minValue, maxValue)
		}
		real := strings.Replace(s.Format, "%s", string(s.Value), 1)
		if !httpguts.ValidHeaderFieldValue(real) || strings.ContainsAny(real, "\r\n\x00") || strings.TrimSpace(real) != real {
			return nil, fmt.Errorf("broker: secret %s: the value or format would not make a valid header value", s.Name)
		}
		ph, err := placeholder(max(minPlaceholder, len(s.Value)))
		if err != nil {
			return nil, err
		}
		s.Header = hdr
		s.Hosts = append([]string(nil), s.Hosts...)
		s.Value = append([]byte(nil), s.Value...)
		b.secrets = append(b.secrets, &secret{
			Secret:      s,
			placeholder: ph,
			sent:        strings.Replace(s.Format, "%s", ph, 1),
			real:        real,
		})
		b.scrub = append(b.scrub, pair{from: s.Value, to: []byte(ph)})
	}
	if err := b.makeCA(permitted); err != nil {
		return nil, err
	}
	return b, nil
}

// validHost reports whether h is a lower-case DNS name or a "*." wildcard
// over one, and returns the name the CA's constraints permit for it.
func validHost(h string) (string, bool) {
	base := strings.TrimPrefix(h, "*.")
	if base == "" || len(base) > 253 || strings.Contains(base, "*") {
		return "", false
	}
	if _, err := netip.ParseAddr(base); err == nil {
		return "", false
	}
	for _, label := range strings.Split(base, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return "", false
		}
		for _, c := range label {
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '_' {
				return "", false
			}
		}
	}
	return base, true
}

const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// placeholder is n characters from crypto/rand, unbiased over the alphabet:
// it carries no information about the value and no other sandbox has it.
func placeholder(n int) (string, error) {
	out := make([]byte, 0, n)
	buf := make([]byte, 2*n)
	for len(out) < n {
		if _, err := rand.Read(buf); err != nil {
			return "", fmt.Errorf("broker: placeholder: %w", err)
		}
		for _, c := range buf {
			if c < 248 && len(out) < n { // 248 = 4*62: keep the draw uniform
				out = append(out, alphabet[int(c)%len(alphabet)])
			}
		}
	}
	return string(out), nil
}

// makeCA makes the per-sandbox CA. Its name constraints permit only the
// secrets' hosts (and names below them) and no IP addresses, so a leaked
// CA certificate trusted by the sandbox vouches for nothing else.
func (b *Broker) makeCA(permitted []string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("broker: CA key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return fmt.Errorf("broker: CA serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:                serial,
		Subject:                     pkix.Name{CommonName: "sandboxio secret broker (per sandbox)"},
		NotBefore:                   now.Add(-time.Hour),
		NotAfter:                    now.Add(caLifetime),
		KeyUsage:                    x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid:       true,
		IsCA:                        true,
		MaxPathLenZero:              true,
		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         permitted,
		ExcludedIPRanges: []*net.IPNet{
			{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)},
			{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)},
		},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("broker: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return fmt.Errorf("broker: CA certificate: %w", err)
	}
	b.caCert, b.caKey = cert, key
	b.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return nil
}

// leaf is the certificate the broker shows the sandbox for host, made once
// per host.
func (b *Broker) leaf(host string) (*tls.Certificate, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c, ok := b.leafs[host]; ok {
		return c, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("broker: leaf key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("broker: leaf serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    b.caCert.NotBefore,
		NotAfter:     b.caCert.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, b.caCert, &key.PublicKey, b.caKey)
	if err != nil {
		return nil, fmt.Errorf("broker: leaf certificate: %w", err)
	}
	c := &tls.Certificate{Certificate: [][]byte{der, b.caCert.Raw}, PrivateKey: key}
	if len(b.leafs) >= maxLeafs {
		// A wildcard host admits any number of names; start over rather
		// than grow without bound.
		clear(b.leafs)
	}
	b.leafs[host] = c
	return c, nil
}

// CACertPEM is the CA certificate the sandbox trusts, PEM-encoded.
func (b *Broker) CACertPEM() []byte { return append([]byte(nil), b.caPEM...) }

// Placeholder is what the sandbox's variable holds for the secret name, or
// "" for a name the broker does not have.
func (b *Broker) Placeholder(name string) string {
	for _, s := range b.secrets {
		if s.Name == name {
			return s.placeholder
		}
	}
	return ""
}

// Intercepts reports whether connections to host go through the broker:
// true only for a name some secret lists.
func (b *Broker) Intercepts(host string) bool {
	host, ok := normalHost(host)
	if !ok {
		return false
	}
	for _, s := range b.secrets {
		if s.covers(host) {
			return true
		}
	}
	return false
}

// normalHost lower-cases a server name and drops a trailing dot.
func normalHost(h string) (string, bool) {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	if _, ok := validHost(h); !ok || strings.HasPrefix(h, "*.") {
		return "", false
	}
	return h, true
}

// covers reports whether the secret may be sent to host (normalised).
func (s *secret) covers(host string) bool {
	for _, h := range s.Hosts {
		if suffix, ok := strings.CutPrefix(h, "*."); ok {
			if strings.HasSuffix(host, "."+suffix) && len(host) > len(suffix)+1 {
				return true
			}
		} else if h == host {
			return true
		}
	}
	return false
}

package broker

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"
)

// The per-sandbox CA vouches for the secrets' hosts only: a certificate it
// signed for any other name, or for an address, does not verify, so the
// CA in the sandbox's bundle lends no trust to anything but its broker's
// leaves. Its PEM carries no key.
func TestCAVouchesOnlyForTheSecretsHosts(t *testing.T) {
	b := newBroker(t)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b.CACertPEM()) || strings.Contains(string(b.CACertPEM()), "PRIVATE") {
		t.Fatal("the CA's PEM is not one certificate alone")
	}
	sign := func(dns string, ip net.IP) *x509.Certificate {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: dns},
			NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		if dns != "" {
			tmpl.DNSNames = []string{dns}
		}
		if ip != nil {
			tmpl.IPAddresses = []net.IP{ip}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, b.caCert, &key.PublicKey, b.caKey)
		if err != nil {
			t.Fatal(err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	verify := func(c *x509.Certificate, name string) error {
		_, err := c.Verify(x509.VerifyOptions{Roots: pool, DNSName: name})
		return err
	}
	leaf, err := b.leaf(testHost)
	if err != nil {
		t.Fatal(err)
	}
	own, err := x509.ParseCertificate(leaf.Certificate[0])
	if err != nil || verify(own, testHost) != nil {
		t.Fatalf("the broker's own leaf for %s does not verify: %v", testHost, err)
	}
	if err := verify(sign(otherHost, nil), otherHost); err == nil {
		t.Fatalf("a leaf the CA signed for %s verified", otherHost)
	}
	if err := verify(sign("", net.ParseIP("198.18.7.1")), "198.18.7.1"); err == nil {
		t.Fatal("a leaf the CA signed for an address verified")
	}
}

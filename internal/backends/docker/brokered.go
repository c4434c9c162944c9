package docker

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/backends/docker/egress/broker"
	"github.com/sandboxio/terraform-provider-sandboxio/internal/rules"
	"github.com/sandboxio/terraform-provider-sandboxio/model"
)

// Where a brokered sandbox finds the broker's CA: the whole bundle (the
// host's trust store and the CA) for the variables that replace a trust
// store, the CA alone for those that add to one. Both are bound read-only.
const (
	caBundleTarget = "/.sandboxio-ca-bundle.pem"
	brokerCATarget = "/.sandboxio-broker-ca.pem"
)

// caVariables point the usual TLS clients at the bundle: OpenSSL and Go
// (SSL_CERT_FILE), Python requests, curl, git, and Node (which adds to its
// own store, so it gets the CA alone).
var caVariables = map[string]string{
	"SSL_CERT_FILE":       caBundleTarget,
	"REQUESTS_CA_BUNDLE":  caBundleTarget,
	"CURL_CA_BUNDLE":      caBundleTarget,
	"GIT_SSL_CAINFO":      caBundleTarget,
	"NODE_EXTRA_CA_CERTS": brokerCATarget,
}

// hostTrustFiles are where distributions keep the system's PEM bundle, in
// the order Go's crypto/x509 looks; SSL_CERT_FILE, when set, comes first.
var hostTrustFiles = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/pki/tls/cacert.pem",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
	"/etc/ssl/cert.pem",
}

// maxTrustBytes bounds the host bundle read into each brokered sandbox.
const maxTrustBytes = 8 << 20

// planBrokered takes the brokered secrets' values for the broker. The
// values are kept apart from the plan's environment and secrets, which
// reach the sandbox: nothing but the broker ever holds them. checkSecrets is
// false for Preflight and warm sandboxes, which have no values.
func (p *createPlan) planBrokered(values map[string]string, checkSecrets bool) error {
	if !checkSecrets {
		return nil
	}
	for _, name := range p.spec.BrokeredNames() {
		v, ok := values[name]
		if !ok {
			return &model.Error{Class: model.ErrConfiguration, Rule: rules.SecretValues, Attribute: "brokered_secrets",
				Message: fmt.Sprintf("no value was supplied for brokered secret %q", name),
				Fix:     "pass the secret's value at run time (from the environment of the caller)"}
		}
		bs := p.spec.BrokeredSecrets[name]
		p.brokered = append(p.brokered, broker.Secret{Name: name, Hosts: bs.Hosts, Header: bs.Header, Format: bs.Format, Value: []byte(v)})
	}
	return nil
}

// brokerFiles are the host files a brokered sandbox's CA is bound from.
// They hold no secret (certificates only) and are removed once the
// container has started: a bound file stays in the container.
type brokerFiles struct {
	dir            string
	bundle, caOnly string
}

func (f *brokerFiles) remove() {
	if f != nil && f.dir != "" {
		_ = os.RemoveAll(f.dir)
	}
}

// openBroker makes the sandbox's broker (its CA and placeholders) before the
// container exists, and gives the container the placeholders and the CA:
// each brokered variable holds its placeholder, never the value, and the
// TLS variables name the bundle. An error names a secret, never a value.
func (p *createPlan) openBroker() error {
	if len(p.brokered) != len(p.spec.BrokeredSecrets) {
		// A plan made without the values (Preflight's, a warm sandbox's)
		// must never create a sandbox that names brokered secrets.
		return backends.RuleRefusal(rules.SecretValues, "brokered_secrets",
			fmt.Sprintf("%d of the spec's %d brokered secret(s) have a value for the broker", len(p.brokered), len(p.spec.BrokeredSecrets)))
	}
	if len(p.brokered) == 0 {
		return nil
	}
	br, err := broker.New(p.brokered)
	if err != nil {
		// broker.New's checks repeat the plan's (SBX-SEC-009, -010 and the
		// value's length): what reaches here is a value the plan cannot
		// see, too short, too long or not a header value.
		return &model.Error{Class: model.ErrConfiguration, Rule: rules.SecretValues, Attribute: "brokered_secrets",
			Message: strings.TrimPrefix(err.Error(), "broker: "),
			Fix:     "supply the real credential (8 to 4096 bytes, one line, no control characters)"}
	}
	// The values now live in the broker; the plan's copies go.
	for i := range p.brokered {
		clear(p.brokered[i].Value)
		p.brokered[i].Value = nil
	}
	trust, err := hostTrust()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "sandboxio-ca-")
	if err != nil {
		return fmt.Errorf("broker: a directory for the CA bundle: %w", err)
	}
	f := &brokerFiles{dir: dir, bundle: filepath.Join(dir, "bundle.pem"), caOnly: filepath.Join(dir, "ca.pem")}
	ca := br.CACertPEM()
	bundle := append(append(bytes.TrimRight(trust, "\n"), '\n'), ca...)
	if len(trust) == 0 {
		bundle = ca
	}
	for path, data := range map[string][]byte{f.bundle: bundle, f.caOnly: ca} {
		if err := os.WriteFile(path, data, 0o644); err != nil { //nolint:gosec // certificates only, read by the sandbox's user
			f.remove()
			return fmt.Errorf("broker: writing the CA bundle: %w", err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil { //nolint:gosec // as above
		f.remove()
		return fmt.Errorf("broker: %w", err)
	}
	p.broker, p.brokerFiles = br, f
	p.brokerRoots = trustPool(trust)
	env := p.env[:0:0]
	for _, kv := range p.env {
		k, _, _ := strings.Cut(kv, "=")
		if _, replaced := caVariables[k]; !replaced {
			env = append(env, kv)
		}
	}
	for _, k := range sortedKeys(caVariables) {
		env = append(env, k+"="+caVariables[k])
	}
	for _, name := range p.spec.BrokeredNames() {
		env = append(env, name+"="+br.Placeholder(name))
	}
	p.env = env
	return nil
}

// hostTrust is the host's trust store as Go finds it: SSL_CERT_FILE, else
// the distribution's bundle; empty when the host has none (the sandbox
// then trusts only the broker's CA through the variables).
func hostTrust() ([]byte, error) {
	files := hostTrustFiles
	if f := os.Getenv("SSL_CERT_FILE"); f != "" {
		files = []string{f}
	}
	for _, name := range files {
		fh, err := os.Open(name)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("broker: the host's trust store %s: %w", name, err)
		}
		data, err := io.ReadAll(io.LimitReader(fh, maxTrustBytes+1))
		fh.Close()
		if err != nil {
			return nil, fmt.Errorf("broker: the host's trust store %s: %w", name, err)
		}
		if len(data) > maxTrustBytes {
			return nil, fmt.Errorf("broker: the host's trust store %s is larger than %d bytes", name, maxTrustBytes)
		}
		return data, nil
	}
	return nil, nil
}

// trustPool is the pool the broker verifies the secrets' hosts with: the
// same store the sandbox's bundle starts from, read at each open (so that a
// changed store counts from the next sandbox). Nil, for a host without a
// bundle file, leaves it to Go's system pool. The last pool is kept, since
// parsing a distribution's bundle costs more than the rest of the broker.
func trustPool(trust []byte) *x509.CertPool {
	if len(trust) == 0 {
		return nil
	}
	sum := sha256.Sum256(trust)
	lastPool.Lock()
	defer lastPool.Unlock()
	if lastPool.pool == nil || lastPool.sum != sum {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(trust)
		lastPool.sum, lastPool.pool = sum, pool
	}
	return lastPool.pool
}

var lastPool struct {
	sync.Mutex
	sum  [sha256.Size]byte
	pool *x509.CertPool
}

// brokeredRequest is a broker's audit entry as the model has it.
func brokeredRequest(r broker.Request) model.BrokeredRequest {
	return model.BrokeredRequest{Secret: r.Secret, Host: r.Host, Method: r.Method, Status: r.Status}
}

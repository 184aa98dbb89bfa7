// Package registries reads the node's registries configuration, the file `tranche up
// --registries` and `tranche agent --registries` take. Its shape is k3s's
// registries.yaml:
//
//	mirrors:
//	  docker.io:                     # a registry as image names spell it, or "*" for every one
//	    endpoint:                    # tried in order, then the registry itself
//	      - "https://mirror.example.com:5000"
//	      - "http://10.240.0.1:5000" # plain HTTP
//	configs:
//	  "mirror.example.com:5000":     # a registry or endpoint host[:port]
//	    auth: {username: u, password: p}   # or auth: base64(user:pass), or identity_token
//	    tls:
//	      ca_file: /etc/ssl/my-ca.pem
//	      cert_file: /etc/ssl/client.pem   # a client certificate, with key_file
//	      key_file: /etc/ssl/client-key.pem
//	      insecure_skip_verify: false
//	catalog: local                   # tranche's own setting, see Config.Catalog
//
// Errors name the field at fault as a path: `mirrors."docker.io".endpoint[0]: ...`.
package registries

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// Catalog settings: whether the node's local catalog (busybox, agnhost, pause, nginx,
// postgres, tranche, ...) answers for its image names before any registry.
const (
	// CatalogLocal, the default, serves the catalog's names from the locally built
	// images, so that the seeds' manifests run offline, `:latest` and imagePullPolicy
	// Always included.
	CatalogLocal = "local"
	// CatalogUpstream pulls the catalog's names from their registries like any other
	// image; the catalog still serves the pause image of pod sandboxes.
	CatalogUpstream = "upstream"
)

// Config is a registries configuration. The zero value (no file) pulls every image
// from its own registry over HTTPS, anonymously or with the pods' pull secrets.
type Config struct {
	// Mirrors maps a registry host ("docker.io", "ghcr.io", "10.0.0.5:5000", or "*")
	// to the endpoints tried before it.
	Mirrors map[string]Mirror `json:"mirrors,omitempty"`
	// Configs maps a registry or endpoint host[:port] to its TLS settings and
	// credentials.
	Configs map[string]HostConfig `json:"configs,omitempty"`
	// Catalog is CatalogLocal ("" means it) or CatalogUpstream.
	Catalog string `json:"catalog,omitempty"`
}

// Mirror lists the endpoints of one registry.
type Mirror struct {
	// Endpoints are URLs "https://host[:port]" or "http://host[:port]" (plain HTTP),
	// optionally with the path "/v2"; a URL without a scheme means HTTPS.
	Endpoints []string `json:"endpoint"`
}

// HostConfig is how to talk to one host.
type HostConfig struct {
	Auth *Auth `json:"auth,omitempty"`
	TLS  *TLS  `json:"tls,omitempty"`
}

// Auth is a host's credentials: username and password, or Auth (base64 of
// "username:password"), or an identity token.
type Auth struct {
	Username      string `json:"username,omitempty"`
	Password      string `json:"password,omitempty"`
	Auth          string `json:"auth,omitempty"`
	IdentityToken string `json:"identity_token,omitempty"`
}

// TLS is a host's TLS settings.
type TLS struct {
	CAFile             string `json:"ca_file,omitempty"`
	CertFile           string `json:"cert_file,omitempty"`
	KeyFile            string `json:"key_file,omitempty"`
	InsecureSkipVerify bool   `json:"insecure_skip_verify,omitempty"`
}

// Endpoint is one place to pull a registry's repositories from.
type Endpoint struct {
	// Host is host[:port].
	Host string
	// PlainHTTP is true for an "http://" endpoint.
	PlainHTTP bool
	// Mirror is false for the registry itself (the last endpoint).
	Mirror bool
}

// Load reads and checks the file at path. An empty path is the zero Config.
func Load(path string) (*Config, error) {
	if path == "" {
		return &Config{}, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("registries configuration: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("registries configuration %s: %w", path, err)
	}
	return c, nil
}

// Parse reads a configuration from YAML (or JSON) and checks it: unknown fields,
// endpoints that are not http(s) URLs of a host, auth without credentials, TLS files
// that cannot be read or parsed. Errors name the field, e.g.
// `mirrors."docker.io".endpoint[0]: ...`.
func Parse(data []byte) (*Config, error) {
	var generic map[string]any
	if err := yaml.Unmarshal(data, &generic); err != nil {
		return nil, err
	}
	if err := checkFields("", generic, schema); err != nil {
		return nil, err
	}
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, err
	}
	return &c, c.Validate()
}

// schema lists the known fields: a nested map is an object, "*" any key.
var schema = map[string]any{
	"catalog": nil,
	"mirrors": map[string]any{"*": map[string]any{"endpoint": nil}},
	"configs": map[string]any{"*": map[string]any{
		"auth": map[string]any{"username": nil, "password": nil, "auth": nil, "identity_token": nil},
		"tls":  map[string]any{"ca_file": nil, "cert_file": nil, "key_file": nil, "insecure_skip_verify": nil},
	}},
}

// checkFields reports the first unknown field of v against known, by path.
func checkFields(path string, v any, known any) error {
	obj, ok := v.(map[string]any)
	fields, isObj := known.(map[string]any)
	if !ok || !isObj {
		return nil
	}
	for _, k := range sortedKeys(obj) {
		sub, ok := fields[k]
		name := k
		if wild, any := fields["*"]; any {
			// A user's key (a registry host) is quoted, as in mirrors."docker.io".
			sub, ok, name = wild, true, strconv.Quote(k)
		}
		p := name
		if path != "" {
			p = path + "." + name
		}
		if !ok {
			return fmt.Errorf("%s: unknown field", p)
		}
		if err := checkFields(p, obj[k], sub); err != nil {
			return err
		}
	}
	return nil
}

// Validate checks c (see Parse); all faults are reported, one per line.
func (c *Config) Validate() error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
	}
	switch c.Catalog {
	case "", CatalogLocal, CatalogUpstream:
	default:
		bad("catalog", "unsupported value %q: must be %q or %q", c.Catalog, CatalogLocal, CatalogUpstream)
	}
	for _, reg := range sortedKeys(c.Mirrors) {
		path := "mirrors." + strconv.Quote(reg)
		if reg != "*" {
			if err := checkHost(reg); err != nil {
				bad(path, "not a registry host[:port]: %v", err)
			}
		}
		m := c.Mirrors[reg]
		if len(m.Endpoints) == 0 {
			bad(path+".endpoint", "at least one endpoint is required")
		}
		for i, e := range m.Endpoints {
			if _, err := ParseEndpoint(e); err != nil {
				bad(fmt.Sprintf("%s.endpoint[%d]", path, i), "%v", err)
			}
		}
	}
	for _, host := range sortedKeys(c.Configs) {
		path := "configs." + strconv.Quote(host)
		if err := checkHost(host); err != nil {
			bad(path, "not a registry host[:port]: %v", err)
		}
		hc := c.Configs[host]
		if a := hc.Auth; a != nil {
			switch {
			case a.Auth != "":
				raw, err := base64.StdEncoding.DecodeString(a.Auth)
				if err != nil || !bytes.Contains(raw, []byte(":")) {
					bad(path+".auth.auth", "must be the base64 encoding of username:password")
				}
			case a.IdentityToken != "":
			case a.Username == "":
				bad(path+".auth.username", "required unless auth or identity_token is set")
			}
		}
		if t := hc.TLS; t != nil {
			if _, err := t.Config(); err != nil {
				errs = append(errs, fmt.Errorf("%s.tls.%w", path, err))
			}
		}
	}
	return errors.Join(errs...)
}

// ParseEndpoint parses an endpoint URL of a mirror.
func ParseEndpoint(s string) (Endpoint, error) {
	raw := s
	if !strings.Contains(s, "://") {
		raw = "https://" + s
	}
	u, err := url.Parse(raw)
	if err != nil {
		return Endpoint{}, fmt.Errorf("invalid URL %q: %v", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return Endpoint{}, fmt.Errorf("unsupported scheme %q in %q: must be http or https", u.Scheme, s)
	}
	if p := strings.TrimSuffix(u.Path, "/"); p != "" && p != "/v2" {
		return Endpoint{}, fmt.Errorf("unsupported path %q in %q: only \"/v2\" or none", u.Path, s)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return Endpoint{}, fmt.Errorf("%q: credentials, query and fragment are not allowed (credentials go under configs)", s)
	}
	if err := checkHost(u.Host); err != nil {
		return Endpoint{}, err
	}
	return Endpoint{Host: u.Host, PlainHTTP: u.Scheme == "http", Mirror: true}, nil
}

// checkHost accepts host[:port] with a non-empty host and a numeric port.
func checkHost(h string) error {
	if h == "" {
		return errors.New("empty host")
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		if strings.ContainsAny(h, "/@ ") {
			return fmt.Errorf("%q is not host[:port]", h)
		}
		return nil
	}
	if host == "" {
		return fmt.Errorf("%q has no host", h)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: port %q is not a number between 1 and 65535", h, port)
	}
	return nil
}

// Endpoints returns where to pull repositories of registry from: its mirrors (or
// those of "*" when it has none), then the registry itself.
func (c *Config) Endpoints(registry string) []Endpoint {
	m, ok := c.Mirrors[registry]
	if !ok {
		m = c.Mirrors["*"]
	}
	var out []Endpoint
	for _, e := range m.Endpoints {
		if ep, err := ParseEndpoint(e); err == nil && ep.Host != registry {
			out = append(out, ep)
		}
	}
	return append(out, Endpoint{Host: registry})
}

// Host returns the configuration of host, if any.
func (c *Config) Host(host string) (HostConfig, bool) {
	hc, ok := c.Configs[host]
	return hc, ok
}

// UpstreamCatalog reports whether the catalog's names are pulled from registries.
func (c *Config) UpstreamCatalog() bool { return c != nil && c.Catalog == CatalogUpstream }

// Credentials returns the username and password (or identity token) of a.
func (a *Auth) Credentials() (username, password, identityToken string) {
	if a.Auth != "" {
		if raw, err := base64.StdEncoding.DecodeString(a.Auth); err == nil {
			u, p, _ := strings.Cut(string(raw), ":")
			return u, p, a.IdentityToken
		}
	}
	return a.Username, a.Password, a.IdentityToken
}

// Config builds the tls.Config of t; errors name the field (ca_file: ...).
func (t *TLS) Config() (*tls.Config, error) {
	cfg := &tls.Config{InsecureSkipVerify: t.InsecureSkipVerify, MinVersion: tls.VersionTLS12} //nolint:gosec // the user's explicit setting
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("ca_file: %v", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file: %s holds no PEM certificate", t.CAFile)
		}
		cfg.RootCAs = pool
	}
	switch {
	case t.CertFile != "" && t.KeyFile != "":
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("cert_file: %v", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	case t.CertFile != "":
		return nil, errors.New("key_file: required with cert_file")
	case t.KeyFile != "":
		return nil, errors.New("cert_file: required with key_file")
	}
	return cfg, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

package registries

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	os.WriteFile(notPEM, []byte("hello"), 0o600)
	for _, tc := range []struct {
		name, yaml string
		errs       []string // substrings, each on its own line
	}{
		{name: "k3s shape", yaml: `
mirrors:
  docker.io:
    endpoint: ["https://mirror.example.com:5000", "http://10.240.0.1:5000/v2"]
  "*":
    endpoint: [mirror.example.com]
configs:
  "mirror.example.com:5000":
    auth: {username: u, password: p}
    tls: {insecure_skip_verify: true}
  "10.240.0.1:5000":
    auth: {auth: dTpw}
catalog: upstream
`},
		{name: "bad endpoints", yaml: `
mirrors:
  docker.io:
    endpoint: ["ftp://x", "http://h:99999", "https://u:p@h", "http://h/other"]
  ghcr.io: {endpoint: []}
`, errs: []string{
			`mirrors."docker.io".endpoint[0]: unsupported scheme "ftp"`,
			`mirrors."docker.io".endpoint[1]: "h:99999": port "99999"`,
			`mirrors."docker.io".endpoint[2]: "https://u:p@h": credentials`,
			`mirrors."docker.io".endpoint[3]: unsupported path "/other"`,
			`mirrors."ghcr.io".endpoint: at least one endpoint is required`,
		}},
		{name: "bad configs", yaml: `
configs:
  "a.example.com":
    auth: {password: p}
  "b.example.com":
    auth: {auth: "not base64!"}
    tls: {ca_file: ` + notPEM + `}
  "c.example.com":
    tls: {cert_file: /x}
catalog: remote
`, errs: []string{
			`catalog: unsupported value "remote"`,
			`configs."a.example.com".auth.username: required`,
			`configs."b.example.com".auth.auth: must be the base64 encoding of username:password`,
			`configs."b.example.com".tls.ca_file: ` + notPEM + ` holds no PEM certificate`,
			`configs."c.example.com".tls.key_file: required with cert_file`,
		}},
		{name: "unknown field", yaml: "mirrors:\n  docker.io:\n    endpoints: [x]\n", errs: []string{`mirrors."docker.io".endpoints: unknown field`}},
		{name: "unknown tls field", yaml: "configs:\n  h:\n    tls: {insecure: true}\n", errs: []string{`configs."h".tls.insecure: unknown field`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if len(tc.errs) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, want := range tc.errs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error lacks %q:\n%v", want, err)
				}
			}
		})
	}
}

func TestEndpoints(t *testing.T) {
	c, err := Parse([]byte(`
mirrors:
  docker.io: {endpoint: ["http://10.240.0.1:5000", "docker.io"]}
  "*": {endpoint: ["https://all.example.com"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	for reg, want := range map[string][]Endpoint{
		"docker.io": {{Host: "10.240.0.1:5000", PlainHTTP: true, Mirror: true}, {Host: "docker.io"}},
		"ghcr.io":   {{Host: "all.example.com", Mirror: true}, {Host: "ghcr.io"}},
	} {
		if d := cmp.Diff(want, c.Endpoints(reg)); d != "" {
			t.Errorf("Endpoints(%s) (-want +got):\n%s", reg, d)
		}
	}
	if got := (&Config{}).Endpoints("quay.io"); len(got) != 1 || got[0].Host != "quay.io" {
		t.Errorf("no configuration: %v", got)
	}
	if u, p, _ := (&Auth{Auth: "dTpw"}).Credentials(); u != "u" || p != "p" {
		t.Errorf("auth: %q %q", u, p)
	}
}

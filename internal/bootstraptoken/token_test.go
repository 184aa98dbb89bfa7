package bootstraptoken

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/cluster-bootstrap/token/jws"
)

func TestGenerateAndParse(t *testing.T) {
	tok, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`).MatchString(tok.String()) {
		t.Fatalf("generated %q", tok)
	}
	back, err := Parse(tok.String())
	if err != nil || back != tok {
		t.Fatalf("Parse(%q) = %v, %v", tok, back, err)
	}
	for _, bad := range []string{"", "abcdef", "abcdef.0123456789abcdeF", "abcde.0123456789abcdef", "abcdef.0123456789abcdef0", "abcdef:0123456789abcdef"} {
		_, err := Parse(bad)
		if err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		} else if strings.Contains(err.Error(), "0123456789") {
			t.Errorf("Parse(%q) error shows the secret: %v", bad, err)
		}
	}
}

func TestSecret(t *testing.T) {
	tok := Token{ID: "abcdef", Secret: "0123456789abcdef"}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := Secret(tok, Options{TTL: time.Hour, Description: "d", Now: now})
	if s.Name != "bootstrap-token-abcdef" || s.Namespace != "kube-system" || s.Type != "bootstrap.kubernetes.io/token" {
		t.Fatalf("meta %s/%s type %s", s.Namespace, s.Name, s.Type)
	}
	want := map[string]string{"token-id": "abcdef", "token-secret": "0123456789abcdef", "expiration": "2026-01-02T04:04:05Z",
		"usage-bootstrap-authentication": "true", "usage-bootstrap-signing": "true", "description": "d",
		"auth-extra-groups": "system:bootstrappers:kubeadm:default-node-token"}
	if len(s.Data) != len(want) {
		t.Errorf("data has %d keys, want %d", len(s.Data), len(want))
	}
	for k, v := range want {
		if string(s.Data[k]) != v {
			t.Errorf("data[%s] = %q, want %q", k, s.Data[k], v)
		}
	}
	info, ok := FromSecret(s)
	if !ok || info.ID != "abcdef" || info.Expires == nil || !info.Expires.Equal(now.Add(time.Hour)) ||
		strings.Join(info.Usages, ",") != "authentication,signing" || info.Groups[0] != DefaultGroup {
		t.Errorf("FromSecret = %+v, %v", info, ok)
	}
	if _, exp := Secret(tok, Options{Now: now}).Data["expiration"]; exp {
		t.Error("TTL 0 must not expire")
	}
	s.Type = v1.SecretTypeOpaque
	if _, ok := FromSecret(s); ok {
		t.Error("an Opaque secret is not a token")
	}
}

func testCA(t *testing.T) (*x509.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestVerifyClusterInfo(t *testing.T) {
	ca, caPEM := testCA(t)
	other, _ := testCA(t)
	kc, err := ClusterInfoKubeconfig("https://10.240.0.1:6443", caPEM)
	if err != nil {
		t.Fatal(err)
	}
	tok := Token{ID: "abcdef", Secret: "0123456789abcdef"}
	sig, err := jws.ComputeDetachedSignature(string(kc), tok.ID, tok.Secret)
	if err != nil {
		t.Fatal(err)
	}
	cm := &v1.ConfigMap{Data: map[string]string{bootstrapapi.KubeConfigKey: string(kc), bootstrapapi.JWSSignatureKeyPrefix + tok.ID: sig}}
	cases := []struct {
		name, hash string
		tok        Token
		wantErr    string
	}{
		{name: "signed, no pin", tok: tok},
		{name: "signed, pinned", tok: tok, hash: CAHash(ca)},
		{name: "wrong secret", tok: Token{ID: "abcdef", Secret: "0123456789abcdee"}, wantErr: "wrong token"},
		{name: "unknown id", tok: Token{ID: "zzzzzz", Secret: "0123456789abcdef"}, wantErr: "has no signature"},
		{name: "hash mismatch", tok: tok, hash: CAHash(other), wantErr: "CA hash mismatch"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := VerifyClusterInfo(cm, c.tok, c.hash)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Server != "https://10.240.0.1:6443" || !d.CA.Equal(ca) {
				t.Errorf("discovered %+v", d)
			}
		})
	}
	var ns ErrNoSignature
	if _, err := VerifyClusterInfo(cm, Token{ID: "zzzzzz", Secret: tok.Secret}, ""); !errors.As(err, &ns) {
		t.Errorf("unknown id: %v is not ErrNoSignature", err)
	}
}

func TestParseCAHash(t *testing.T) {
	ca, _ := testCA(t)
	h := CAHash(ca)
	if got, err := ParseCAHash(strings.ToUpper(h[7:])); err == nil {
		t.Errorf("no algorithm accepted: %s", got)
	}
	if got, err := ParseCAHash("sha256:" + strings.ToUpper(h[7:])); err != nil || got != h {
		t.Errorf("ParseCAHash = %q, %v", got, err)
	}
	if _, err := ParseCAHash("sha256:abcd"); err == nil {
		t.Error("short digest accepted")
	}
}

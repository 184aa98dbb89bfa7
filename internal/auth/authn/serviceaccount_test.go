package authn

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeObjects implements every getter over a map "namespace/name" → uid (nodes use
// "/name").
type fakeObjects map[string]string

func (f fakeObjects) get(key string) (string, bool, error) {
	uid, ok := f[key]
	return uid, ok, nil
}
func (f fakeObjects) GetServiceAccountUID(ns, name string) (string, bool, error) {
	return f.get(ns + "/" + name)
}
func (f fakeObjects) GetPodUID(ns, name string) (string, bool, error) { return f.get(ns + "/" + name) }
func (f fakeObjects) GetNodeUID(name string) (string, bool, error)    { return f.get("/" + name) }

var (
	_ ServiceAccountGetter = fakeObjects{}
	_ PodGetter            = fakeObjects{}
	_ NodeGetter           = fakeObjects{}
)

func mustKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func mustIssuer(t testing.TB, key crypto.Signer, now time.Time) *Issuer {
	t.Helper()
	iss, err := NewIssuer(key, "")
	if err != nil {
		t.Fatal(err)
	}
	iss.now = func() time.Time { return now }
	return iss
}

func TestServiceAccountTokens(t *testing.T) {
	key, otherKey := mustKey(t), mustKey(t)
	issuedAt := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	accounts := fakeObjects{"t1/robot": "sa-uid", "t1/web-0": "pod-uid", "/node-a": "node-uid"}

	type tokenSpec struct {
		key       crypto.Signer
		ns, name  string
		uid       string
		audiences []string
		bound     *BoundObject
	}
	robot := func(mut func(*tokenSpec)) tokenSpec {
		s := tokenSpec{key: key, ns: "t1", name: "robot", uid: "sa-uid"}
		if mut != nil {
			mut(&s)
		}
		return s
	}
	wantRobot := &User{
		Name:   "system:serviceaccount:t1:robot",
		UID:    "sa-uid",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:t1"},
	}
	cases := []struct {
		name      string
		token     tokenSpec
		at        time.Time
		audiences []string
		objects   fakeObjects
		want      *User
		wantErr   string
	}{
		{name: "valid token", token: robot(nil), at: issuedAt.Add(time.Minute), want: wantRobot},
		{name: "valid within the leeway after expiry", token: robot(nil), at: issuedAt.Add(time.Hour + 59*time.Second), want: wantRobot},
		{name: "expired", token: robot(nil), at: issuedAt.Add(time.Hour + 61*time.Second), wantErr: "service account token has expired"},
		{name: "not yet valid", token: robot(nil), at: issuedAt.Add(-2 * time.Minute), wantErr: "not valid yet"},
		{name: "wrong audience", token: robot(func(s *tokenSpec) { s.audiences = []string{"vault"} }), at: issuedAt, wantErr: `token audiences ["vault"] is invalid for the target audiences ["https://kubernetes.default.svc.cluster.local"]`},
		{name: "one accepted audience among several", token: robot(func(s *tokenSpec) { s.audiences = []string{"vault", "api"} }), at: issuedAt, audiences: []string{"api"}, want: wantRobot},
		{name: "signed with another key", token: robot(func(s *tokenSpec) { s.key = otherKey }), at: issuedAt, wantErr: "token signature is invalid"},
		{name: "service account deleted", token: robot(nil), at: issuedAt, objects: fakeObjects{}, wantErr: "service account t1/robot has been deleted"},
		{name: "service account recreated", token: robot(nil), at: issuedAt, objects: fakeObjects{"t1/robot": "new-uid"}, wantErr: "service account UID (new-uid) does not match claim (sa-uid)"},
		{
			name: "bound to a live pod and node",
			token: robot(func(s *tokenSpec) {
				s.bound = &BoundObject{Pod: &ObjectRef{Name: "web-0", UID: "pod-uid"}, Node: &ObjectRef{Name: "node-a", UID: "node-uid"}}
			}),
			at: issuedAt,
			want: &User{Name: wantRobot.Name, UID: "sa-uid", Groups: wantRobot.Groups, Extra: map[string][]string{
				ExtraPodName: {"web-0"}, ExtraPodUID: {"pod-uid"}, ExtraNodeName: {"node-a"}, ExtraNodeUID: {"node-uid"},
			}},
		},
		{
			// As kube-apiserver: the node of a pod-bound token is information, not a binding.
			name: "bound to a pod whose node is gone or was not read",
			token: robot(func(s *tokenSpec) {
				s.bound = &BoundObject{Pod: &ObjectRef{Name: "web-0", UID: "pod-uid"}, Node: &ObjectRef{Name: "node-b"}}
			}),
			at: issuedAt,
			want: &User{Name: wantRobot.Name, UID: "sa-uid", Groups: wantRobot.Groups, Extra: map[string][]string{
				ExtraPodName: {"web-0"}, ExtraPodUID: {"pod-uid"}, ExtraNodeName: {"node-b"},
			}},
		},
		{
			name:    "bound to a deleted node",
			token:   robot(func(s *tokenSpec) { s.bound = &BoundObject{Node: &ObjectRef{Name: "node-b", UID: "gone"}} }),
			at:      issuedAt,
			wantErr: "node node-b has been deleted",
		},
		{
			name:    "bound to a deleted pod",
			token:   robot(func(s *tokenSpec) { s.bound = &BoundObject{Pod: &ObjectRef{Name: "web-1", UID: "gone"}} }),
			at:      issuedAt,
			wantErr: "pod t1/web-1 has been deleted",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			iss := mustIssuer(t, tc.token.key, issuedAt)
			token, exp, err := iss.Issue(tc.token.ns, tc.token.name, tc.token.uid, tc.token.audiences, 0, tc.token.bound)
			if err != nil {
				t.Fatalf("Issue: %v", err)
			}
			if !exp.Equal(issuedAt.Add(time.Hour)) {
				t.Errorf("expiry %v, want one hour after issue", exp)
			}
			objects := tc.objects
			if objects == nil {
				objects = accounts
			}
			auth := &ServiceAccountTokens{
				Keys:      []crypto.PublicKey{key.Public()},
				Audiences: tc.audiences,
				Accounts:  objects,
				Pods:      objects,
				Nodes:     objects,
				Now:       func() time.Time { return tc.at },
			}
			req := httptest.NewRequest("GET", "/api", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			got, ok, err := auth.Authenticate(req)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || ok {
					t.Fatalf("got (%v, %v, %v), want error containing %q", got, ok, err, tc.wantErr)
				}
				return
			}
			if err != nil || !ok {
				t.Fatalf("got (%v, %v, %v), want a user", got, ok, err)
			}
			jti := got.Extra[ExtraCredentialID]
			if len(jti) != 1 || !strings.HasPrefix(jti[0], "JTI=") || len(jti[0]) < 10 {
				t.Errorf("credential id %v, want [JTI=<uuid>]", jti)
			}
			delete(got.Extra, ExtraCredentialID)
			if len(got.Extra) == 0 {
				got.Extra = nil
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("user (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTokenClaimsShape(t *testing.T) {
	key := mustKey(t)
	now := time.Unix(1700000000, 0)
	iss := mustIssuer(t, key, now)
	token, _, err := iss.Issue("t1", "robot", "sa-uid", []string{"a"}, 10*time.Minute, &BoundObject{Pod: &ObjectRef{Name: "p", UID: "pu"}})
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(token, ".")
	header, _ := base64.RawURLEncoding.DecodeString(parts[0])
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var h, c map[string]any
	if err := json.Unmarshal(header, &h); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(payload, &c); err != nil {
		t.Fatal(err)
	}
	kid, _ := keyID(key.Public())
	if diff := cmp.Diff(map[string]any{"alg": "ES256", "kid": kid}, h); diff != "" {
		t.Errorf("header (-want +got):\n%s", diff)
	}
	delete(c, "jti")
	want := map[string]any{
		"iss": DefaultIssuer,
		"sub": "system:serviceaccount:t1:robot",
		"aud": []any{"a"},
		"iat": float64(1700000000), "nbf": float64(1700000000), "exp": float64(1700000600),
		"kubernetes.io": map[string]any{
			"namespace":      "t1",
			"serviceaccount": map[string]any{"name": "robot", "uid": "sa-uid"},
			"pod":            map[string]any{"name": "p", "uid": "pu"},
		},
	}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("claims (-want +got):\n%s", diff)
	}
}

func TestServiceAccountTokensIgnoreForeignTokens(t *testing.T) {
	key := mustKey(t)
	auth := &ServiceAccountTokens{Keys: []crypto.PublicKey{key.Public()}, Accounts: fakeObjects{}}
	other, err := NewIssuer(key, "https://elsewhere.example")
	if err != nil {
		t.Fatal(err)
	}
	foreign, _, err := other.Issue("t1", "robot", "u", nil, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The JSON serialization of one of our tokens, which go-jose parses too: not a
	// Kubernetes token.
	mine, _, err := mustIssuer(t, key, time.Now()).Issue("t1", "robot", "u", nil, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(mine, ".")
	jsonJWS := `{"protected":"` + parts[0] + `","payload":"` + parts[1] + `","signature":"` + parts[2] + `"}`
	for name, token := range map[string]string{"static token": "abc123", "other issuer": foreign, "garbage": "a.b.c", "JSON serialization": jsonJWS} {
		t.Run(name, func(t *testing.T) {
			if u, ok, err := auth.AuthenticateToken(token); u != nil || ok || err != nil {
				t.Fatalf("got (%v, %v, %v), want no answer", u, ok, err)
			}
		})
	}
}

func TestNewIssuerRejectsOtherKeys(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewIssuer(key, ""); err == nil {
		t.Fatal("NewIssuer with a P-384 key succeeded, want an error")
	}
}

func FuzzServiceAccountToken(f *testing.F) {
	key := mustKey(f)
	iss := mustIssuer(f, key, time.Unix(1700000000, 0))
	token, _, err := iss.Issue("t1", "robot", "u", nil, 0, &BoundObject{Pod: &ObjectRef{Name: "p", UID: "q"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(token)
	f.Add("")
	f.Add("..")
	f.Add("eyJhbGciOiJFUzI1NiJ9.e30.")
	f.Add("eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJodHRwczovL2t1YmVybmV0ZXMuZGVmYXVsdC5zdmMuY2x1c3Rlci5sb2NhbCIsImF1ZCI6MX0.AAAA")
	auth := &ServiceAccountTokens{
		Keys:     []crypto.PublicKey{key.Public(), nil, "not a key"},
		Accounts: fakeObjects{"t1/robot": "u"},
		Now:      func() time.Time { return time.Unix(1700000000, 0) },
	}
	f.Fuzz(func(t *testing.T, token string) {
		user, ok, err := auth.AuthenticateToken(token)
		if ok && (user == nil || err != nil) {
			t.Fatalf("inconsistent answer (%v, %v, %v)", user, ok, err)
		}
	})
}

// Made by the hand-written ES256 signer this package had before it used go-jose, with
// legacyKey: tokens minted before the change must verify after it.
const (
	legacyKey = `-----BEGIN EC PRIVATE KEY-----
MHcCAQEEINz51YEUWZ9pTdxQ2p5BuLxf0BzND6GcxJ6QbIL94bdroAoGCCqGSM49
AwEHoUQDQgAEKS98dKNi/2CE6Sf45kGK180ql8rscwGfPvyI8c7z6LK8Rv9WZ4CE
G8UmSGX59qqQFj3uHlPDxCh8UqnFfJr3ag==
-----END EC PRIVATE KEY-----
`
	// Issued at 1767225600 for ten minutes, audiences "api" and "vault", bound to
	// pod t1/web-0 and node node-a.
	legacyToken = "eyJhbGciOiJFUzI1NiIsImtpZCI6IlhtMzVKMXFjN1gyMmlJbnQyQW1fcWRpVnRwMnU4aHo2T21QVnpfR2h4X00ifQ." +
		"eyJpc3MiOiJodHRwczovL2t1YmVybmV0ZXMuZGVmYXVsdC5zdmMuY2x1c3Rlci5sb2NhbCIsInN1YiI6InN5c3RlbTpzZXJ2aWNlYWNjb3VudDp0MTpyb2JvdCIsImF1ZCI6WyJhcGkiLCJ2YXVsdCJdLCJleHAiOjE3NjcyMjYyMDAsIm5iZiI6MTc2NzIyNTYwMCwiaWF0IjoxNzY3MjI1NjAwLCJqdGkiOiIzOWNiOGVmYS03YmNhLTQ2MmEtYTNjYy02ZWFmMzAyMDhkYzciLCJrdWJlcm5ldGVzLmlvIjp7Im5hbWVzcGFjZSI6InQxIiwic2VydmljZWFjY291bnQiOnsibmFtZSI6InJvYm90IiwidWlkIjoic2EtdWlkIn0sInBvZCI6eyJuYW1lIjoid2ViLTAiLCJ1aWQiOiJwb2QtdWlkIn0sIm5vZGUiOnsibmFtZSI6Im5vZGUtYSIsInVpZCI6Im5vZGUtdWlkIn19fQ." +
		"1T8ZnIWCC1OGhz6zNXJpv-LT7giqyuw8DTjo7vR5XZXBY2n4PR3j90TY7xxuAfO21UkjTeL3AX2SI8RcWPDi7g"
)

func TestLegacyTokenStillVerifies(t *testing.T) {
	block, _ := pem.Decode([]byte(legacyKey))
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	issuedAt := time.Unix(1767225600, 0)
	objects := fakeObjects{"t1/robot": "sa-uid", "t1/web-0": "pod-uid", "/node-a": "node-uid"}
	auth := &ServiceAccountTokens{
		Keys:      []crypto.PublicKey{key.Public()},
		Audiences: []string{"vault"},
		Accounts:  objects, Pods: objects, Nodes: objects,
		Now: func() time.Time { return issuedAt.Add(5 * time.Minute) },
	}
	got, ok, err := auth.AuthenticateToken(legacyToken)
	if err != nil || !ok {
		t.Fatalf("got (%v, %v, %v), want a user", got, ok, err)
	}
	want := &User{
		Name: "system:serviceaccount:t1:robot", UID: "sa-uid",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:t1"},
		Extra: map[string][]string{
			ExtraCredentialID: {"JTI=39cb8efa-7bca-462a-a3cc-6eaf30208dc7"},
			ExtraPodName:      {"web-0"}, ExtraPodUID: {"pod-uid"},
			ExtraNodeName: {"node-a"}, ExtraNodeUID: {"node-uid"},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("user (-want +got):\n%s", diff)
	}
	// The same key issues tokens with the same kid, and the old token's rules hold.
	iss := mustIssuer(t, key, issuedAt)
	token, _, err := iss.Issue("t1", "robot", "sa-uid", nil, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h, l := strings.Split(token, ".")[0], strings.Split(legacyToken, ".")[0]; h != l {
		t.Errorf("header %s, want the legacy header %s", h, l)
	}
	auth.Now = func() time.Time { return issuedAt.Add(11*time.Minute + time.Second) }
	if _, _, err := auth.AuthenticateToken(legacyToken); err == nil || err.Error() != "service account token has expired" {
		t.Errorf("legacy token after expiry: err %v, want it expired", err)
	}
}

func TestServiceAccountTokenAlgorithmPinned(t *testing.T) {
	key := mustKey(t)
	auth := &ServiceAccountTokens{Keys: []crypto.PublicKey{key.Public()}, Accounts: fakeObjects{"t1/robot": "u"}}
	enc := base64.RawURLEncoding.EncodeToString
	payload := enc([]byte(`{"iss":"` + DefaultIssuer + `","sub":"system:serviceaccount:t1:robot","aud":["` + DefaultIssuer + `"],"exp":4102444800,"kubernetes.io":{"namespace":"t1","serviceaccount":{"name":"robot","uid":"u"}}}`))
	for _, alg := range []string{"none", "HS256", "ES384", "RS256"} {
		t.Run(alg, func(t *testing.T) {
			token := enc([]byte(`{"alg":"`+alg+`"}`)) + "." + payload + "." + enc([]byte("signature"))
			u, ok, err := auth.AuthenticateToken(token)
			if ok || u != nil || err == nil || !strings.Contains(err.Error(), `token signing algorithm "`+alg+`" is not supported`) {
				t.Fatalf("got (%v, %v, %v), want the algorithm refused", u, ok, err)
			}
		})
	}
}

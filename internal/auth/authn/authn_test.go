package authn

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func TestStaticTokens(t *testing.T) {
	const file = `# node join tokens
tok1,system:node:a,uid-a,"system:nodes,ops"
tok2,bob,uid-b
,nobody,uid-x
tok3,carol,uid-c,,ignored
`
	path := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := LoadStaticTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		header string
		want   *User
	}{
		{name: "token with groups", header: "Bearer tok1", want: &User{Name: "system:node:a", UID: "uid-a", Groups: []string{"system:nodes", "ops"}}},
		{name: "token without groups", header: "Bearer tok2", want: &User{Name: "bob", UID: "uid-b"}},
		{name: "extra columns ignored", header: "bearer tok3", want: &User{Name: "carol", UID: "uid-c"}},
		{name: "unknown token", header: "Bearer nope"},
		{name: "empty token never matches", header: "Bearer "},
		{name: "basic auth is not a bearer token", header: "Basic dG9rMQ=="},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/api", nil)
			req.Header.Set("Authorization", tc.header)
			got, ok, err := tokens.Authenticate(req)
			if err != nil {
				t.Fatal(err)
			}
			if ok != (tc.want != nil) {
				t.Fatalf("ok = %v, want %v", ok, tc.want != nil)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("user (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := ParseStaticTokens(strings.NewReader("tok,user\n")); err == nil {
		t.Error("a record with two columns was accepted")
	}
}

func TestClientCert(t *testing.T) {
	verified := &x509.Certificate{Subject: pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}}}
	cases := []struct {
		name    string
		tls     *tls.ConnectionState
		want    *User
		wantErr bool
	}{
		{name: "plain HTTP"},
		{name: "no certificate", tls: &tls.ConnectionState{}},
		{name: "verified certificate", tls: &tls.ConnectionState{PeerCertificates: []*x509.Certificate{verified}, VerifiedChains: [][]*x509.Certificate{{verified}}},
			want: &User{Name: "admin", Groups: []string{"system:masters"}}},
		{name: "unverified certificate", tls: &tls.ConnectionState{PeerCertificates: []*x509.Certificate{verified}}, wantErr: true},
		{name: "no common name", tls: &tls.ConnectionState{PeerCertificates: []*x509.Certificate{{}}, VerifiedChains: [][]*x509.Certificate{{{}}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/api", nil)
			req.TLS = tc.tls
			got, ok, err := ClientCert{}.Authenticate(req)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if ok != (tc.want != nil) {
				t.Fatalf("ok = %v, want %v", ok, tc.want != nil)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("user (-want +got):\n%s", diff)
			}
		})
	}
}

type authFunc func(*http.Request) (*User, bool, error)

func (f authFunc) Authenticate(r *http.Request) (*User, bool, error) { return f(r) }

func TestUnion(t *testing.T) {
	none := authFunc(func(*http.Request) (*User, bool, error) { return nil, false, nil })
	failing := authFunc(func(*http.Request) (*User, bool, error) { return nil, false, errors.New("bad token") })
	answer := func(u *User) Authenticator {
		return authFunc(func(*http.Request) (*User, bool, error) { return u, true, nil })
	}
	cases := []struct {
		name    string
		union   Union
		want    *User
		wantErr string
	}{
		{name: "first answer wins and gets system:authenticated", union: Union{none, answer(&User{Name: "a", Groups: []string{"g"}}), answer(&User{Name: "b"})},
			want: &User{Name: "a", Groups: []string{"g", "system:authenticated"}}},
		{name: "an error does not stop later authenticators", union: Union{failing, answer(&User{Name: "a"})},
			want: &User{Name: "a", Groups: []string{"system:authenticated"}}},
		{name: "already authenticated is not repeated", union: Union{answer(&User{Name: "a", Groups: []string{"system:authenticated"}})},
			want: &User{Name: "a", Groups: []string{"system:authenticated"}}},
		{name: "nobody answers", union: Union{none}},
		{name: "errors are reported when nobody answers", union: Union{none, failing}, wantErr: "bad token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := tc.union.Authenticate(httptest.NewRequest("GET", "/", nil))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if ok != (tc.want != nil) {
				t.Fatalf("ok = %v", ok)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("user (-want +got):\n%s", diff)
			}
		})
	}
	if diff := cmp.Diff(&User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}, Anonymous()); diff != "" {
		t.Errorf("Anonymous (-want +got):\n%s", diff)
	}
}

func TestImpersonate(t *testing.T) {
	admin := &User{Name: "admin", Groups: []string{"ops", "system:authenticated"}}
	// allowOnly allows the listed "resource/subresource namespace/name" keys.
	allowOnly := func(keys ...string) func(Attributes) (bool, string, error) {
		return func(a Attributes) (bool, string, error) {
			if a.Verb != "impersonate" || a.User != admin {
				return false, "", nil
			}
			res := a.Resource
			if a.Subresource != "" {
				res += "/" + a.Subresource
			}
			key := a.APIGroup + ":" + res + " " + a.Namespace + "/" + a.Name
			for _, k := range keys {
				if k == key {
					return true, "", nil
				}
			}
			return false, "", nil
		}
	}
	cases := []struct {
		name    string
		headers http.Header
		allow   []string
		want    *User
		wantErr string
	}{
		{name: "no headers keeps the requester", want: admin},
		{name: "user", headers: http.Header{"Impersonate-User": {"jane"}}, allow: []string{":users /jane"},
			want: &User{Name: "jane", Groups: []string{"system:authenticated"}}},
		{name: "user with groups", headers: http.Header{"Impersonate-User": {"jane"}, "Impersonate-Group": {"dev", "qa"}},
			allow: []string{":users /jane", ":groups /dev", ":groups /qa"},
			want:  &User{Name: "jane", Groups: []string{"dev", "qa", "system:authenticated"}}},
		{name: "service account gets its groups", headers: http.Header{"Impersonate-User": {"system:serviceaccount:t1:robot"}},
			allow: []string{":serviceaccounts t1/robot"},
			want:  &User{Name: "system:serviceaccount:t1:robot", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:t1", "system:authenticated"}}},
		{name: "extras and uid", headers: http.Header{"Impersonate-User": {"jane"}, "Impersonate-Extra-Scopes": {"view", "edit"}, "Impersonate-Uid": {"1234"}},
			allow: []string{":users /jane", "authentication.k8s.io:userextras/scopes /view", "authentication.k8s.io:userextras/scopes /edit", "authentication.k8s.io:uids /1234"},
			want:  &User{Name: "jane", UID: "1234", Groups: []string{"system:authenticated"}, Extra: map[string][]string{"scopes": {"view", "edit"}}}},
		{name: "escaped extra key", headers: http.Header{"Impersonate-User": {"jane"}, "Impersonate-Extra-Example.com%2fteam": {"a"}},
			allow: []string{":users /jane", "authentication.k8s.io:userextras/example.com/team /a"},
			want:  &User{Name: "jane", Groups: []string{"system:authenticated"}, Extra: map[string][]string{"example.com/team": {"a"}}}},
		{name: "anonymous gets system:unauthenticated", headers: http.Header{"Impersonate-User": {"system:anonymous"}}, allow: []string{":users /system:anonymous"},
			want: &User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}},
		{name: "user denied", headers: http.Header{"Impersonate-User": {"x"}},
			wantErr: `users "x" is forbidden: User "admin" cannot impersonate resource "users" in API group "" at the cluster scope`},
		{name: "group denied", headers: http.Header{"Impersonate-User": {"jane"}, "Impersonate-Group": {"system:masters"}}, allow: []string{":users /jane"},
			wantErr: `groups "system:masters" is forbidden: User "admin" cannot impersonate resource "groups" in API group "" at the cluster scope`},
		{name: "service account denied", headers: http.Header{"Impersonate-User": {"system:serviceaccount:t1:robot"}},
			wantErr: `serviceaccounts "robot" is forbidden: User "admin" cannot impersonate resource "serviceaccounts" in API group "" in the namespace "t1"`},
		{name: "extra denied", headers: http.Header{"Impersonate-User": {"jane"}, "Impersonate-Extra-Scopes": {"all"}}, allow: []string{":users /jane"},
			wantErr: `userextras.authentication.k8s.io "all" is forbidden: User "admin" cannot impersonate resource "userextras/scopes" in API group "authentication.k8s.io" at the cluster scope`},
		{name: "group without user", headers: http.Header{"Impersonate-Group": {"dev"}}, wantErr: "without impersonating a user"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/api", nil)
			for k, v := range tc.headers {
				req.Header[k] = v
			}
			got, err := Impersonate(req, admin, allowOnly(tc.allow...))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if strings.Contains(tc.wantErr, "forbidden") && !apierrors.IsForbidden(err) {
					t.Errorf("err is not a 403: %#v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("user (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSplitServiceAccountUsername(t *testing.T) {
	cases := []struct {
		in       string
		ns, name string
		ok       bool
	}{
		{in: "system:serviceaccount:t1:robot", ns: "t1", name: "robot", ok: true},
		{in: "system:serviceaccount:t1", ok: false},
		{in: "system:serviceaccount:t1:a:b", ok: false},
		{in: "system:serviceaccount:T1:robot", ok: false},
		{in: "jane", ok: false},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			ns, name, ok := SplitServiceAccountUsername(tc.in)
			if ns != tc.ns || name != tc.name || ok != tc.ok {
				t.Errorf("got (%q, %q, %v), want (%q, %q, %v)", ns, name, ok, tc.ns, tc.name, tc.ok)
			}
		})
	}
}

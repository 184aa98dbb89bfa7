package core

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

func makeSecret(mutate func(*v1.Secret)) *v1.Secret {
	s := &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "default", CreationTimestamp: svcTestCreated},
		Data:       map[string][]byte{"password": []byte("hunter2")},
	}
	DefaultSecret(s)
	if mutate != nil {
		mutate(s)
	}
	return s
}

func TestDefaultSecret(t *testing.T) {
	s := &v1.Secret{Data: map[string][]byte{"a": []byte("1"), "b": []byte("2")}, StringData: map[string]string{"b": "two", "c": "3"}}
	SecretResource().Default(s)
	want := &v1.Secret{Type: v1.SecretTypeOpaque, Data: map[string][]byte{"a": []byte("1"), "b": []byte("two"), "c": []byte("3")}}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("secret (-want +got):\n%s", diff)
	}
	only := &v1.Secret{StringData: map[string]string{"k": "v"}, Type: v1.SecretTypeBasicAuth}
	DefaultSecret(only)
	if diff := cmp.Diff(&v1.Secret{Type: v1.SecretTypeBasicAuth, Data: map[string][]byte{"k": []byte("v")}}, only); diff != "" {
		t.Errorf("stringData only (-want +got):\n%s", diff)
	}
}

func TestValidateSecret(t *testing.T) {
	typed := func(typ v1.SecretType, data map[string][]byte) func(*v1.Secret) {
		return func(s *v1.Secret) { s.Type, s.Data = typ, data }
	}
	tests := []struct {
		name   string
		mutate func(*v1.Secret)
		want   []string
	}{
		{name: "valid opaque", want: []string{}},
		{name: "bad key", mutate: func(s *v1.Secret) { s.Data["a b"] = nil },
			want: []string{`data[a b]: Invalid value: "a b": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')`}},
		{name: "too big", mutate: func(s *v1.Secret) { s.Data["big"] = []byte(strings.Repeat("x", 1<<20)) },
			want: []string{"data: Too long: may not be more than 1048576 bytes"}},
		{name: "service account token needs the account name", mutate: typed(v1.SecretTypeServiceAccountToken, nil),
			want: []string{"metadata.annotations[kubernetes.io/service-account.name]: Required value"}},
		{name: "service account token", mutate: func(s *v1.Secret) {
			typed(v1.SecretTypeServiceAccountToken, nil)(s)
			s.Annotations = map[string]string{v1.ServiceAccountNameKey: "default"}
		}, want: []string{}},
		{name: "dockerconfigjson missing", mutate: typed(v1.SecretTypeDockerConfigJson, nil),
			want: []string{"data[.dockerconfigjson]: Required value"}},
		{name: "dockerconfigjson not JSON", mutate: typed(v1.SecretTypeDockerConfigJson, map[string][]byte{".dockerconfigjson": []byte("{")}),
			want: []string{`data[.dockerconfigjson]: Invalid value: "<secret contents redacted>": unexpected end of JSON input`}},
		{name: "dockerconfigjson", mutate: typed(v1.SecretTypeDockerConfigJson, map[string][]byte{".dockerconfigjson": []byte(`{"auths":{}}`)}), want: []string{}},
		{name: "dockercfg missing", mutate: typed(v1.SecretTypeDockercfg, nil), want: []string{"data[.dockercfg]: Required value"}},
		{name: "basic auth needs one of the keys", mutate: typed(v1.SecretTypeBasicAuth, nil),
			want: []string{"data[username]: Required value", "data[password]: Required value"}},
		{name: "basic auth with an empty password", mutate: typed(v1.SecretTypeBasicAuth, map[string][]byte{"password": nil}), want: []string{}},
		{name: "ssh auth", mutate: typed(v1.SecretTypeSSHAuth, map[string][]byte{"ssh-privatekey": nil}),
			want: []string{"data[ssh-privatekey]: Required value"}},
		{name: "tls", mutate: typed(v1.SecretTypeTLS, map[string][]byte{"tls.crt": nil}),
			want: []string{"data[tls.key]: Required value"}},
		{name: "tls both missing", mutate: typed(v1.SecretTypeTLS, nil),
			want: []string{"data[tls.crt]: Required value", "data[tls.key]: Required value"}},
		{name: "unknown types are free-form", mutate: typed("example.com/custom", nil), want: []string{}},
	}
	r := SecretResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, svcErrs(r.Validate(makeSecret(tc.mutate)))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateSecretUpdate(t *testing.T) {
	immutable := func(s *v1.Secret) { s.Immutable = svcPtr(true) }
	tests := []struct {
		name     string
		old, new *v1.Secret
		want     []string
	}{
		{name: "data changes", old: makeSecret(nil), new: makeSecret(func(s *v1.Secret) { s.Data["x"] = nil }), want: []string{}},
		{name: "type is immutable", old: makeSecret(nil), new: makeSecret(func(s *v1.Secret) { s.Type = "example.com/x" }),
			want: []string{`type: Invalid value: "example.com/x": field is immutable`}},
		{name: "immutable data", old: makeSecret(immutable), new: makeSecret(func(s *v1.Secret) { immutable(s); s.Data["x"] = nil }),
			want: []string{"data: Forbidden: field is immutable when `immutable` is set"}},
		{name: "unsetting immutable", old: makeSecret(immutable), new: makeSecret(func(s *v1.Secret) { s.Immutable = svcPtr(false) }),
			want: []string{"immutable: Forbidden: field is immutable when `immutable` is set"}},
	}
	r := SecretResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, svcErrs(r.ValidateUpdate(tc.new, tc.old))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSecretTableAndFields(t *testing.T) {
	r := SecretResource()
	s := makeSecret(func(s *v1.Secret) { s.Data["user"] = nil })
	if diff := cmp.Diff([]interface{}{"creds", "Opaque", int64(2), "5m"}, r.Row(s, svcTestNow)); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(fields.Set{"type": "Opaque"}, r.Fields(s)); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
}

func TestServiceAccountRow(t *testing.T) {
	sa := &v1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: "default", CreationTimestamp: svcTestCreated},
		Secrets:    []v1.ObjectReference{{Name: "a"}},
	}
	r := ServiceAccountResource()
	if diff := cmp.Diff([]interface{}{"default", int64(1), "5m"}, r.Row(sa, svcTestNow)); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
	if r.ShortNames[0] != "sa" || r.Row(&v1.Pod{}, svcTestNow) != nil {
		t.Errorf("identity or foreign object handling is wrong")
	}
}

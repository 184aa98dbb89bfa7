package apilookup

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestLookup(t *testing.T) {
	client := fake.NewClientset(
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"},
			Data: map[string]string{"a": "1"}, BinaryData: map[string][]byte{"b": {0xff, 0x00}}},
		&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"},
			Data: map[string][]byte{"user": []byte("admin")}, StringData: map[string]string{"extra": "x"}},
		&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "rc"}, Handler: "runc"},
	)
	lookup := New(client)
	for _, tc := range []struct {
		name, kind, obj string
		want            map[string]string
		found, err      bool
	}{
		{name: "configmap", kind: "ConfigMap", obj: "cm", want: map[string]string{"a": "1", "b": "/wA="}, found: true},
		{name: "secret decoded", kind: "Secret", obj: "s", want: map[string]string{"user": "admin", "extra": "x"}, found: true},
		{name: "missing configmap", kind: "ConfigMap", obj: "nope"},
		{name: "missing secret", kind: "Secret", obj: "nope"},
		{name: "runtimeclass", kind: "RuntimeClass", obj: "rc", want: map[string]string{"handler": "runc"}, found: true},
		{name: "missing runtimeclass", kind: "RuntimeClass", obj: "nope"},
		{name: "other kind", kind: "Pod", obj: "cm", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, found, err := lookup(context.Background(), tc.kind, "ns", tc.obj)
			if (err != nil) != tc.err || found != tc.found {
				t.Fatalf("found %v, err %v; want found %v, error %v", found, err, tc.found, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("data (-want +got):\n%s", diff)
			}
		})
	}
}

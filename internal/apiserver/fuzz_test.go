package apiserver

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tranche/tranche/internal/registry"
)

// FuzzDecodeRequest feeds arbitrary bodies of every accepted media type to the request
// decoder: it may refuse them, never panic.
func FuzzDecodeRequest(f *testing.F) {
	seeds := []struct{ ct, body string }{
		{"application/json", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"a"},"spec":{"ports":[{"port":80}]}}`},
		{"application/json", `{"metadata":{"name":"a"},"spec":{"ports":[{"port":"x"}]}}`},
		{"application/json", `{"metadata":{"name":"a","name":"b"}}`},
		{"application/yaml", "apiVersion: v1\nkind: Service\nmetadata:\n  name: a\n"},
		{"application/vnd.kubernetes.protobuf", "k8s\x00\x0a\x02v1"},
		{"application/json", `[1,2,3]`},
	}
	for _, s := range seeds {
		f.Add(s.ct, []byte(s.body), "Strict")
	}
	f.Fuzz(func(t *testing.T, ct string, body []byte, fv string) {
		v, err := parseFieldValidation(fv)
		if err != nil {
			return
		}
		_, _ = decodeRequest(ct, body, &v1.Service{}, v1.SchemeGroupVersion.WithKind("Service"), v)
		_, _ = decodeRequest(ct, body, &metav1.DeleteOptions{}, metav1.SchemeGroupVersion.WithKind("DeleteOptions"), validationIgnore)
	})
}

// FuzzApplyPatch applies arbitrary patches of the three kinds to a Service.
func FuzzApplyPatch(f *testing.F) {
	seeds := []struct {
		pt    string
		patch string
	}{
		{string(types.MergePatchType), `{"spec":{"selector":{"a":"b"}}}`},
		{string(types.JSONPatchType), `[{"op":"add","path":"/metadata/labels","value":{"x":"y"}}]`},
		{string(types.JSONPatchType), `[{"op":"move","from":"/spec","path":"/spec/x"}]`},
		{string(types.StrategicMergePatchType), `{"spec":{"ports":[{"port":80,"$patch":"delete"}]}}`},
		{string(types.StrategicMergePatchType), `{"$setElementOrder/ports":[{"port":1}]}`},
	}
	for _, s := range seeds {
		f.Add(s.pt, []byte(s.patch))
	}
	e := &entry{res: &registry.Resource{
		GVK: v1.SchemeGroupVersion.WithKind("Service"), Plural: "services", Namespaced: true,
		New: func() runtime.Object { return &v1.Service{} },
	}}
	e.store = &resourceStore{res: e.res}
	f.Fuzz(func(t *testing.T, pt string, patch []byte) {
		switch types.PatchType(pt) {
		case types.MergePatchType, types.JSONPatchType, types.StrategicMergePatchType:
		default:
			return
		}
		cur := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "d", ResourceVersion: "5"},
			Spec: v1.ServiceSpec{Ports: []v1.ServicePort{{Port: 80, Protocol: v1.ProtocolTCP}}, Selector: map[string]string{"a": "b"}}}
		_, _, _ = applyPatch(e, cur, types.PatchType(pt), patch, validationStrict)
	})
}

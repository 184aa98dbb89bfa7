package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"github.com/tranche/tranche/internal/registry/all"
	"github.com/tranche/tranche/internal/storage"
)

func makePod(name string, mutate func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: "u-1", Labels: map[string]string{"app": "x", "tier": "web"},
			CreationTimestamp: metav1.Unix(1700000000, 0)},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "nginx", Ports: []v1.ContainerPort{{ContainerPort: 80}}}},
			TerminationGracePeriodSeconds: ptr.To[int64](30)},
		Status: v1.PodStatus{Phase: v1.PodRunning},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

// TestStoredEncodingRoundTrip checks that objects are stored in the protobuf envelope,
// and that DecodeStored reads both that and the JSON values earlier versions stored.
func TestStoredEncodingRoundTrip(t *testing.T) {
	asJSON := func(obj runtime.Object) []byte {
		data, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	asStored := func(obj runtime.Object) []byte {
		data, err := encodeStored(obj)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(data, protobufMagic) {
			t.Fatalf("stored value %q lacks the protobuf envelope", data)
		}
		return data
	}
	deployment := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{Kind: "Deployment", APIVersion: "apps/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "ns", Generation: 3, Annotations: map[string]string{"a": "b"}},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}},
	}
	tests := []struct {
		name  string
		obj   runtime.Object
		value func(runtime.Object) []byte
		into  func() runtime.Object
	}{
		{"pod as protobuf", makePod("p", nil), asStored, func() runtime.Object { return &v1.Pod{} }},
		{"pod as legacy JSON", makePod("p", nil), asJSON, func() runtime.Object { return &v1.Pod{} }},
		{"deleting pod as protobuf", makePod("p", func(p *v1.Pod) {
			p.DeletionTimestamp = ptr.To(metav1.Unix(1700000100, 0))
			p.Finalizers = []string{"f"}
		}), asStored, func() runtime.Object { return &v1.Pod{} }},
		{"deployment as protobuf", deployment, asStored, func() runtime.Object { return &appsv1.Deployment{} }},
		{"deployment as legacy JSON", deployment, asJSON, func() runtime.Object { return &appsv1.Deployment{} }},
		{"empty configmap as protobuf", &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, asStored, func() runtime.Object { return &v1.ConfigMap{} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.into()
			if err := DecodeStored(tt.value(tt.obj), got); err != nil {
				t.Fatal(err)
			}
			want := tt.obj.DeepCopyObject()
			// The stored value does not carry the type: the store sets it on reads.
			want.GetObjectKind().SetGroupVersionKind(got.GetObjectKind().GroupVersionKind())
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeStoredRejectsGarbage(t *testing.T) {
	for _, data := range [][]byte{
		[]byte("k8s\x00\xff\xff"),
		[]byte("{not json"),
		append([]byte("k8s\x00"), 0x12, 0x03, 0xff, 0xff, 0xff),
	} {
		if err := DecodeStored(data, &v1.Pod{}); err == nil {
			t.Errorf("DecodeStored(%q) succeeded, want an error", data)
		}
	}
}

// TestLegacyJSONValuesAreServed checks that objects stored as JSON by an earlier
// version are still read, updated (and then rewritten as protobuf) and listed.
func TestLegacyJSONValuesAreServed(t *testing.T) {
	f := newFixture(t)
	legacy := makeConfigMap("old", nil)
	legacy.UID = "u-old"
	data, err := json.Marshal(legacy)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Create(f.ctx, "/registry/core/configmaps/default/old", data); err != nil {
		t.Fatal(err)
	}
	cms := f.client.CoreV1().ConfigMaps("default")
	got, err := cms.Get(f.ctx, "old", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != "u-old" || got.Data["k"] != "v" {
		t.Fatalf("legacy object read as %+v", got)
	}
	got.Data["k"] = "w"
	if _, err := cms.Update(f.ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	kv, err := f.store.Get(f.ctx, "/registry/core/configmaps/default/old")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(kv.Value, protobufMagic) {
		t.Errorf("updated value not rewritten as protobuf: %q", kv.Value)
	}
	list, err := cms.List(f.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Data["k"] != "w" || list.Items[0].UID != "u-old" {
		t.Errorf("list after update = %+v", list.Items)
	}
}

// TestRawListMatchesDecodedList checks, for every served resource, that the list
// response spliced from stored values decodes exactly as the list built from decoded
// objects, for values stored as protobuf and as legacy JSON alike.
func TestRawListMatchesDecodedList(t *testing.T) {
	for _, res := range all.Resources() {
		if res.NewList == nil || res.Storage != nil || res.Computed || !res.HasVerb("list") {
			continue
		}
		t.Run(res.GVR().String(), func(t *testing.T) {
			rs := &resourceStore{res: &res, gr: res.GVR().GroupResource(), storedGVR: res.GVR(), newStored: res.New}
			var kvs []storage.KeyValue
			for i, legacy := range []bool{false, true, false} {
				obj := res.New()
				m, err := meta.Accessor(obj)
				if err != nil {
					t.Fatal(err)
				}
				m.SetName(fmt.Sprintf("o%d", i))
				m.SetNamespace("ns")
				m.SetLabels(map[string]string{"i": fmt.Sprint(i)})
				m.SetUID(types.UID(fmt.Sprintf("u%d", i)))
				m.SetCreationTimestamp(metav1.Unix(1700000000, 0))
				obj.GetObjectKind().SetGroupVersionKind(res.GVK)
				var value []byte
				if legacy {
					value, err = json.Marshal(obj)
				} else {
					value, err = encodeStored(obj)
				}
				if err != nil {
					t.Fatal(err)
				}
				kvs = append(kvs, storage.KeyValue{Key: rs.key("ns", m.GetName()), Value: value, ModRevision: int64(40 + i)})
			}
			listGVK := res.GVK.GroupVersion().WithKind(res.GVK.Kind + "List")
			remaining := int64(7)
			lm := &metav1.ListMeta{ResourceVersion: "99", Continue: "c", RemainingItemCount: &remaining}
			spliced, err := rs.encodeRawList(listGVK, lm, kvs)
			if err != nil {
				t.Fatal(err)
			}

			var items []runtime.Object
			for _, kv := range kvs {
				obj, err := rs.decode(kv.Value, kv.ModRevision)
				if err != nil {
					t.Fatal(err)
				}
				items = append(items, obj)
			}
			list := res.NewList()
			if err := meta.SetList(list, items); err != nil {
				t.Fatal(err)
			}
			la, _ := meta.ListAccessor(list)
			la.SetResourceVersion("99")
			la.SetContinue("c")
			la.SetRemainingItemCount(&remaining)
			list.GetObjectKind().SetGroupVersionKind(listGVK)
			built, err := encodeResponse(list)
			if err != nil {
				t.Fatal(err)
			}

			decode := func(data []byte) runtime.Object {
				obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(data, nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				return obj
			}
			got, want := decode(spliced), decode(built)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("spliced list differs (-built +spliced):\n%s", diff)
			}
			objs, _ := meta.ExtractList(got)
			for i, obj := range objs {
				if m, _ := meta.Accessor(obj); m.GetResourceVersion() != fmt.Sprint(40+i) {
					t.Errorf("item %d has resourceVersion %q, want %d", i, m.GetResourceVersion(), 40+i)
				}
			}
		})
	}
}

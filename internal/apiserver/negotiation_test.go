package apiserver

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	restwatch "k8s.io/client-go/rest/watch"
)

// contentTypes records the Content-Type of every response a client receives.
type contentTypes struct {
	mu   sync.Mutex
	seen map[string]bool
	next http.RoundTripper
}

func (c *contentTypes) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err == nil {
		c.mu.Lock()
		c.seen[resp.Header.Get("Content-Type")] = true
		c.mu.Unlock()
	}
	return resp, err
}

func (c *contentTypes) has(ct string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen[ct]
}

func recordingConfig(host string, mutate func(*rest.Config)) (*rest.Config, *contentTypes) {
	rec := &contentTypes{seen: map[string]bool{}}
	cfg := &rest.Config{Host: host, WrapTransport: func(rt http.RoundTripper) http.RoundTripper {
		rec.next = rt
		return rec
	}}
	if mutate != nil {
		mutate(cfg)
	}
	return cfg, rec
}

// TestResponseNegotiation runs the same get/list/watch/error sequence with a client-go
// clientset that prefers protobuf (its default) and one configured for JSON, checking
// both the decoded results and the format the server answered in.
func TestResponseNegotiation(t *testing.T) {
	tests := []struct {
		name       string
		config     func(*rest.Config)
		objectType string
		watchType  string
		// forbidden must never be answered (errors are JSON for every client).
		forbidden []string
	}{
		{"protobuf (client-go default)", nil, protobufType, protobufWatchType, nil},
		{"json", func(c *rest.Config) {
			c.ContentType = "application/json"
			c.AcceptContentTypes = "application/json"
		}, "application/json", "application/json", []string{protobufType, protobufWatchType}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			cfg, rec := recordingConfig(f.srv.URL, tt.config)
			client := kubernetes.NewForConfigOrDie(cfg)
			cms := client.CoreV1().ConfigMaps("default")
			created, err := cms.Create(f.ctx, makeConfigMap("a", func(cm *v1.ConfigMap) { cm.Labels = map[string]string{"app": "x"} }), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if created.UID == "" || created.ResourceVersion == "" || created.Data["k"] != "v" {
				t.Fatalf("create returned %+v", created)
			}
			got, err := cms.Get(f.ctx, "a", metav1.GetOptions{})
			if err != nil || got.UID != created.UID || got.Labels["app"] != "x" || got.ResourceVersion != created.ResourceVersion {
				t.Fatalf("get: %v %+v", err, got)
			}
			list, err := cms.List(f.ctx, metav1.ListOptions{})
			if err != nil || len(list.Items) != 1 || list.Items[0].Name != "a" || list.ResourceVersion == "" {
				t.Fatalf("list: %v %+v", err, list)
			}
			if _, err := cms.Get(f.ctx, "missing", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Fatalf("get of a missing object: %v, want NotFound", err)
			}
			if _, err := cms.Create(f.ctx, makeConfigMap("a", nil), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
				t.Fatalf("duplicate create: %v, want AlreadyExists", err)
			}

			w, err := cms.Watch(f.ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			got.Data["k"] = "w"
			if _, err := cms.Update(f.ctx, got, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := cms.Delete(f.ctx, "a", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			var events []watch.EventType
			for len(events) < 2 {
				ev := <-w.ResultChan()
				if ev.Type == watch.Bookmark {
					continue
				}
				cm, ok := ev.Object.(*v1.ConfigMap)
				if !ok || cm.Name != "a" {
					t.Fatalf("watch event %s with %#v", ev.Type, ev.Object)
				}
				if ev.Type == watch.Modified && cm.Data["k"] != "w" {
					t.Errorf("MODIFIED carries %v", cm.Data)
				}
				events = append(events, ev.Type)
			}
			if events[0] != watch.Modified || events[1] != watch.Deleted {
				t.Errorf("watch events %v, want [MODIFIED DELETED]", events)
			}
			if !rec.has(tt.objectType) || !rec.has(tt.watchType) {
				t.Errorf("response content types %v, want objects as %q and watch as %q", rec.seen, tt.objectType, tt.watchType)
			}
			for _, ct := range tt.forbidden {
				if rec.has(ct) {
					t.Errorf("response content types %v include %q", rec.seen, ct)
				}
			}
		})
	}
}

// TestWatchErrorAndInitialEventsInProtobuf checks the protobuf stream's special events:
// the initial-events-end bookmark and the 410 of a compacted start.
func TestWatchErrorAndInitialEventsInProtobuf(t *testing.T) {
	f := newFixture(t)
	cfg, rec := recordingConfig(f.srv.URL, nil)
	client := kubernetes.NewForConfigOrDie(cfg)
	cms := client.CoreV1().ConfigMaps("default")
	if _, err := cms.Create(f.ctx, makeConfigMap("a", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	yes := true
	w, err := cms.Watch(f.ctx, metav1.ListOptions{SendInitialEvents: &yes, AllowWatchBookmarks: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		t.Fatal(err)
	}
	ev := <-w.ResultChan()
	if cm, ok := ev.Object.(*v1.ConfigMap); ev.Type != watch.Added || !ok || cm.Name != "a" {
		t.Fatalf("first event %s %#v, want ADDED a", ev.Type, ev.Object)
	}
	ev = <-w.ResultChan()
	if cm, ok := ev.Object.(*v1.ConfigMap); ev.Type != watch.Bookmark || !ok || cm.Annotations[initialEventsEnd] != "true" {
		t.Fatalf("second event %s %#v, want the initial-events-end bookmark", ev.Type, ev.Object)
	}
	w.Stop()

	rev, _ := f.store.Revision(f.ctx)
	if err := f.store.Compact(f.ctx, rev); err != nil {
		t.Fatal(err)
	}
	w, err = cms.Watch(f.ctx, metav1.ListOptions{ResourceVersion: "1"})
	if err == nil {
		defer w.Stop()
		ev := <-w.ResultChan()
		if st, ok := ev.Object.(*metav1.Status); ev.Type != watch.Error || !ok || st.Code != http.StatusGone {
			t.Fatalf("watch from a compacted revision: %s %#v, want ERROR 410", ev.Type, ev.Object)
		}
	} else if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		t.Fatalf("watch from a compacted revision: %v, want 410", err)
	}
	if !rec.has(protobufWatchType) {
		t.Errorf("response content types %v, want a protobuf watch", rec.seen)
	}
}

// TestMetadataClientProtobuf checks that the metadata client, which asks for
// PartialObjectMetadata in protobuf first, gets it for get, list and watch.
func TestMetadataClientProtobuf(t *testing.T) {
	f := newFixture(t)
	cfg, rec := recordingConfig(f.srv.URL, nil)
	mc := metadata.NewForConfigOrDie(cfg)
	gvr := v1.SchemeGroupVersion.WithResource("configmaps")
	if _, err := f.client.CoreV1().ConfigMaps("default").Create(f.ctx, makeConfigMap("m", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := mc.Resource(gvr).Namespace("default").Get(f.ctx, "m", metav1.GetOptions{})
	if err != nil || got.Name != "m" || got.UID == "" {
		t.Fatalf("metadata get: %v %+v", err, got)
	}
	list, err := mc.Resource(gvr).List(f.ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 || list.Items[0].Name != "m" {
		t.Fatalf("metadata list: %v %+v", err, list)
	}
	w, err := mc.Resource(gvr).Namespace("default").Watch(f.ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := f.client.CoreV1().ConfigMaps("default").Delete(f.ctx, "m", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := <-w.ResultChan()
	if pom, ok := ev.Object.(*metav1.PartialObjectMetadata); ev.Type != watch.Deleted || !ok || pom.Name != "m" {
		t.Fatalf("metadata watch event: %v %#v", ev.Type, ev.Object)
	}
	if !rec.has(protobufType) || !rec.has(protobufWatchType) {
		t.Errorf("response content types %v, want protobuf objects and watch", rec.seen)
	}
}

// TestProtobufWatchFramesDecode decodes frames with client-go's own watch decoder.
func TestProtobufWatchFramesDecode(t *testing.T) {
	tests := []struct {
		typ  watch.EventType
		obj  runtime.Object
		want func(runtime.Object) bool
	}{
		{watch.Added, makeConfigMap("a", nil), func(o runtime.Object) bool {
			cm, ok := o.(*v1.ConfigMap)
			return ok && cm.Name == "a" && cm.Data["k"] == "v"
		}},
		{watch.Error, expiredStatus("too old resource version: 1"), func(o runtime.Object) bool {
			st, ok := o.(*metav1.Status)
			return ok && st.Code == http.StatusGone && st.Reason == metav1.StatusReasonExpired
		}},
		{watch.Bookmark, &v1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "7"}}, func(o runtime.Object) bool {
			p, ok := o.(*v1.Pod)
			return ok && p.ResourceVersion == "7"
		}},
	}
	var stream bytes.Buffer
	for _, tt := range tests {
		frame, err := protobufWatchFrame(tt.typ, tt.obj)
		if err != nil {
			t.Fatal(err)
		}
		stream.Write(frame)
	}
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), protobufType)
	if !ok || info.StreamSerializer == nil {
		t.Fatal("client-go has no protobuf stream serializer")
	}
	frames := info.StreamSerializer.Framer.NewFrameReader(io.NopCloser(&stream))
	dec := restwatch.NewDecoder(streaming.NewDecoder(frames, info.StreamSerializer.Serializer), scheme.Codecs.UniversalDeserializer())
	for _, tt := range tests {
		typ, obj, err := dec.Decode()
		if err != nil {
			t.Fatalf("decoding %s: %v", tt.typ, err)
		}
		if typ != tt.typ || !tt.want(obj) {
			t.Errorf("decoded %s %#v, want %s", typ, obj, tt.typ)
		}
	}
}

func TestAcceptNegotiation(t *testing.T) {
	tests := []struct {
		accept           string
		protobuf         bool
		metadata, metaPB bool
	}{
		{"", false, false, false},
		{"application/json", false, false, false},
		{"application/vnd.kubernetes.protobuf,application/json", true, false, false},
		{"application/json,application/vnd.kubernetes.protobuf", false, false, false},
		{"*/*", false, false, false},
		{"application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json", false, true, true},
		{"application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json", false, true, false},
		{"application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json", false, false, false},
	}
	for _, tt := range tests {
		r, _ := http.NewRequest(http.MethodGet, "/api/v1/pods", nil)
		r.Header.Set("Accept", tt.accept)
		if got := prefersProtobuf(r); got != tt.protobuf {
			t.Errorf("prefersProtobuf(%q) = %v, want %v", tt.accept, got, tt.protobuf)
		}
		if md, pb := metadataFormat(r); md != tt.metadata || pb != tt.metaPB {
			t.Errorf("metadataFormat(%q) = %v, %v, want %v, %v", tt.accept, md, pb, tt.metadata, tt.metaPB)
		}
	}
}

package apiserver

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/tranche/tranche/internal/storage"
)

// initialEventsEnd is the bookmark annotation that ends a watch's initial events.
const initialEventsEnd = "k8s.io/initial-events-end"

// watchWriter streams watch events as newline-separated JSON or, for protobuf clients,
// as length-prefixed protobuf WatchEvents.
type watchWriter struct {
	w       http.ResponseWriter
	flusher http.Flusher
	s       *Server
	r       *http.Request
	e       *entry
	table   bool
	partial bool
	// protobuf frames each event as client-go's streaming decoder reads it.
	protobuf bool
	sent     bool
}

// protobufWatchType is the Content-Type of a protobuf watch stream.
const protobufWatchType = protobufType + ";stream=watch"

// watchFormat decides how the watch of r is streamed.
func watchFormat(r *http.Request) (table, partial, protobuf bool) {
	if wantsTable(r) {
		return true, false, false
	}
	if wanted, pb := metadataFormat(r); wanted {
		return false, true, pb
	}
	return false, false, prefersProtobuf(r)
}

// protobufWatchFrame encodes one event as Kubernetes' protobuf watch streams do: a
// 4-byte big-endian length, then a metav1.WatchEvent (without envelope) whose object is
// the enveloped protobuf encoding of obj.
func protobufWatchFrame(typ watch.EventType, obj runtime.Object) ([]byte, error) {
	raw, err := encodeResponse(obj)
	if err != nil {
		return nil, err
	}
	ev := metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: raw}}
	n := ev.Size()
	frame := make([]byte, 4+n)
	binary.BigEndian.PutUint32(frame, uint32(n))
	if _, err := ev.MarshalToSizedBuffer(frame[4:]); err != nil {
		return nil, fmt.Errorf("encoding %s watch event: %w", typ, err)
	}
	return frame, nil
}

// jsonWatchFrame encodes one event as a line of JSON.
func jsonWatchFrame(typ watch.EventType, obj interface{}) ([]byte, error) {
	data, err := json.Marshal(struct {
		Type   watch.EventType `json:"type"`
		Object interface{}     `json:"object"`
	}{typ, obj})
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// writeShared writes a cached event's object (prev: its previous state), reusing the
// event's encoding when this watch wants the plain object.
func (ww *watchWriter) writeShared(typ watch.EventType, ev *cacheEvent, prev bool) error {
	if ww.table || ww.partial {
		obj := ev.cur
		if prev {
			obj = ev.prev
		}
		return ww.write(typ, obj)
	}
	data, err := ev.frame(typ, prev, ww.protobuf)
	if err != nil {
		return err
	}
	return ww.send(data)
}

func (ww *watchWriter) send(data []byte) error {
	if _, err := ww.w.Write(data); err != nil {
		return err
	}
	ww.flusher.Flush()
	ww.s.metrics.watchEvent(ww.e)
	return nil
}

func (ww *watchWriter) write(typ watch.EventType, obj runtime.Object) error {
	payload := obj
	if ww.partial && typ != watch.Error {
		payload = partialMetadata(obj)
	} else if ww.table && typ != watch.Bookmark && typ != watch.Error {
		t, err := ww.s.tableFor(ww.r, ww.e, []runtime.Object{obj}, !ww.sent)
		if err != nil {
			return err
		}
		m, _ := meta.Accessor(obj)
		t.ResourceVersion = m.GetResourceVersion()
		payload = t
		ww.sent = true
	}
	var data []byte
	var err error
	if ww.protobuf {
		data, err = protobufWatchFrame(typ, payload)
	} else {
		data, err = jsonWatchFrame(typ, payload)
	}
	if err != nil {
		return err
	}
	return ww.send(data)
}

func (ww *watchWriter) bookmark(rev int64, endOfInitial bool) error {
	obj := ww.e.res.New()
	obj.GetObjectKind().SetGroupVersionKind(ww.e.res.GVK)
	m, _ := meta.Accessor(obj)
	m.SetResourceVersion(strconv.FormatInt(rev, 10))
	if endOfInitial {
		m.SetAnnotations(map[string]string{initialEventsEnd: "true"})
	}
	return ww.write(watch.Bookmark, obj)
}

func expiredStatus(msg string) *metav1.Status {
	st := apierrors.NewResourceExpired(msg).Status()
	st.Kind, st.APIVersion = "Status", "v1"
	return &st
}

// watch handles ?watch=true: optional initial events, then changes from the store,
// filtered by selectors (an object leaving the selection is sent as DELETED).
func (s *Server) watch(ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo, e *entry) error {
	q := r.URL.Query()
	f, err := parseFilter(e.res, q)
	if err != nil {
		return err
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		return apierrors.NewInternalError(errors.New("streaming is not supported by this connection"))
	}
	bookmarks := isTrue(q.Get("allowWatchBookmarks"))
	sendInitial := isTrue(q.Get("sendInitialEvents"))
	if q.Has("sendInitialEvents") && (q.Get("resourceVersionMatch") != "NotOlderThan" || !bookmarks) {
		return apierrors.NewInvalid(metav1.SchemeGroupVersion.WithKind("ListOptions").GroupKind(), "", nil)
	}
	timeout := time.Duration(1800+rand.IntN(1800)) * time.Second
	if t := q.Get("timeoutSeconds"); t != "" {
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil || n < 0 {
			return apierrors.NewBadRequest(fmt.Sprintf("invalid timeoutSeconds %q", t))
		}
		if n > 0 {
			timeout = time.Duration(n) * time.Second
		}
	}
	rv := q.Get("resourceVersion")
	if !sendInitial && rv != "" && rv != "0" {
		if n, err := strconv.ParseInt(rv, 10, 64); err != nil || n < 0 {
			return apierrors.NewBadRequest(fmt.Sprintf("invalid resource version %q", rv))
		}
	}
	// Once the request is accepted, kube-apiserver reports what keeps the watch from
	// starting (a revision compacted away or not reached in time) as the one ERROR event
	// of a 200 stream, not as the response's status: client-go's reflector relists on
	// it. watchErr is that error.
	var watchErr error
	var initial []runtime.Object
	var start int64
	var cursor *cacheCursor
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if sendInitial {
		// The initial state must be at least as new as the revision the client names.
		watchErr = s.waitForRequestedRevision(ctx, rv)
	}
	if watchErr == nil {
		if sendInitial || rv == "" || rv == "0" {
			initial, start, _, _, err = s.listObjects(anyStateRead(ctx, rv), e, ri.Namespace, f, 0, "", "", "")
			if err != nil {
				return err
			}
		} else {
			start, _ = strconv.ParseInt(rv, 10, 64)
		}
		cursor, err = e.cache.open(wctx, start)
		var st apierrors.APIStatus
		if errors.As(err, &st) {
			watchErr = err
		} else if err != nil {
			return err
		}
	}
	ww := &watchWriter{w: w, flusher: flusher, s: s, r: r, e: e}
	ww.table, ww.partial, ww.protobuf = watchFormat(r)
	if ww.protobuf {
		w.Header().Set("Content-Type", protobufWatchType)
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	if watchErr != nil {
		_ = ww.write(watch.Error, watchErrorStatus(watchErr, start))
		return nil
	}
	for _, obj := range initial {
		if err := ww.write(watch.Added, obj); err != nil {
			return nil
		}
	}
	if sendInitial {
		if err := ww.bookmark(start, true); err != nil {
			return nil
		}
	}
	// Every resource is watched under its all-namespaces prefix; this watch keeps its
	// namespace's keys.
	keyPrefix := e.store.prefix(ri.Namespace)
	var lastBookmark int64
	for {
		events, progress, changed, ended, err := cursor.next()
		for _, ev := range events {
			cursor.rev = ev.rev
			if !strings.HasPrefix(ev.key, keyPrefix) {
				continue
			}
			if err := forwardEvent(ww, f, ev); err != nil {
				return nil
			}
		}
		if ended {
			if err != nil {
				_ = ww.write(watch.Error, watchErrorStatus(err, start))
			}
			return nil
		}
		if bookmarks && progress > lastBookmark && progress >= cursor.rev {
			if err := ww.bookmark(progress, false); err != nil {
				return nil
			}
			lastBookmark = progress
		}
		select {
		case <-wctx.Done():
			return nil
		case <-changed:
		}
	}
}

// watchErrorStatus is the Status of the ERROR event that ends a watch.
func watchErrorStatus(err error, start int64) *metav1.Status {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		out := st.Status()
		out.Kind, out.APIVersion = "Status", "v1"
		return &out
	}
	if errors.Is(err, storage.ErrCompacted) {
		return expiredStatus(fmt.Sprintf("too old resource version: %d", start))
	}
	return expiredStatus(err.Error())
}

// forwardEvent translates one change for the client.
func forwardEvent(ww *watchWriter, f *filter, ev *cacheEvent) error {
	curMatch := ev.cur != nil && f.matches(ev.cur)
	prevMatch := ev.prev != nil && f.matches(ev.prev)
	switch {
	case ev.typ == storage.Deleted:
		if prevMatch {
			return ww.writeShared(watch.Deleted, ev, true)
		}
	case curMatch && (ev.typ == storage.Added || !prevMatch):
		return ww.writeShared(watch.Added, ev, false)
	case curMatch:
		return ww.writeShared(watch.Modified, ev, false)
	case prevMatch:
		// The object left the selection: the client sees it go, in its new state.
		return ww.writeShared(watch.Deleted, ev, false)
	}
	return nil
}

package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
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

// watchWriter streams watch events as newline-separated JSON.
type watchWriter struct {
	w       http.ResponseWriter
	flusher http.Flusher
	s       *Server
	r       *http.Request
	e       *entry
	table   bool
	partial bool
	sent    bool
}

func (ww *watchWriter) write(typ watch.EventType, obj runtime.Object) error {
	var payload interface{} = obj
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
	data, err := json.Marshal(struct {
		Type   watch.EventType `json:"type"`
		Object interface{}     `json:"object"`
	}{typ, payload})
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if _, err := ww.w.Write(data); err != nil {
		return err
	}
	ww.flusher.Flush()
	return nil
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
	var initial []runtime.Object
	var start int64
	if sendInitial || rv == "" || rv == "0" {
		initial, start, _, _, err = s.listObjects(ctx, e, ri.Namespace, f, 0, "", "", "")
		if err != nil {
			return err
		}
	} else {
		start, err = strconv.ParseInt(rv, 10, 64)
		if err != nil || start < 0 {
			return apierrors.NewBadRequest(fmt.Sprintf("invalid resource version %q", rv))
		}
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	events, err := s.cfg.Storage.Watch(wctx, e.store.prefix(ri.Namespace), start)
	if err != nil {
		if errors.Is(err, storage.ErrCompacted) {
			return apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d", start))
		}
		return apierrors.NewInternalError(err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	ww := &watchWriter{w: w, flusher: flusher, s: s, r: r, e: e, table: wantsTable(r), partial: wantsMetadata(r)}
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
	for {
		select {
		case <-wctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				return nil
			}
			if err := s.forwardEvent(ww, e, f, ev, start, bookmarks); err != nil {
				return nil
			}
			if ev.Type == storage.Error {
				return nil
			}
		}
	}
}

// forwardEvent translates one storage event for the client.
func (s *Server) forwardEvent(ww *watchWriter, e *entry, f *filter, ev storage.Event, start int64, bookmarks bool) error {
	switch ev.Type {
	case storage.Error:
		msg := fmt.Sprintf("too old resource version: %d", start)
		if !errors.Is(ev.Err, storage.ErrCompacted) {
			msg = ev.Err.Error()
		}
		return ww.write(watch.Error, expiredStatus(msg))
	case storage.Progress:
		if bookmarks {
			return ww.bookmark(ev.Revision, false)
		}
		return nil
	}
	var cur, prev runtime.Object
	var err error
	if ev.Value != nil {
		if cur, err = e.store.decode(ev.Value, ev.Revision); err != nil {
			return nil
		}
	}
	if ev.PrevValue != nil {
		if prev, err = e.store.decode(ev.PrevValue, ev.Revision); err != nil {
			prev = nil
		}
	}
	curMatch := cur != nil && f.matches(cur)
	prevMatch := prev != nil && f.matches(prev)
	switch {
	case ev.Type == storage.Deleted:
		if prevMatch {
			return ww.write(watch.Deleted, prev)
		}
	case curMatch && (ev.Type == storage.Added || !prevMatch):
		return ww.write(watch.Added, cur)
	case curMatch:
		return ww.write(watch.Modified, cur)
	case prevMatch:
		// The object left the selection: the client sees it go, in its new state.
		return ww.write(watch.Deleted, cur)
	}
	return nil
}

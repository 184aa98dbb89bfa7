package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tranche/tranche/internal/registry"
)

// objects is the registry.Objects a resource's subresource handlers get: the generic
// read, update and delete paths of its entry.
type objects struct {
	s *Server
	e *entry
}

var _ registry.Objects = objects{}

func (o objects) Get(ctx context.Context, ns, name string) (runtime.Object, error) {
	obj, _, err := o.e.store.get(ctx, ns, name)
	return obj, err
}

func (o objects) GetOf(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) (runtime.Object, error) {
	e := o.s.routes.Load().byGVR[gvr]
	if e == nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("%s are not served", gvr.Resource))
	}
	obj, _, err := e.store.get(ctx, ns, name)
	return obj, err
}

func (o objects) ListOf(ctx context.Context, gvr schema.GroupVersionResource, ns string) ([]runtime.Object, error) {
	if o.s.routes.Load().byGVR[gvr] == nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("%s are not served", gvr.Resource))
	}
	return o.s.List(ctx, gvr, ns)
}

func (o objects) UpdateOf(ctx context.Context, gvr schema.GroupVersionResource, ns, name, sub string, dry bool, mutate func(runtime.Object) (runtime.Object, error)) (runtime.Object, int, error) {
	e := o.s.routes.Load().byGVR[gvr]
	if e == nil {
		return nil, 0, apierrors.NewInternalError(fmt.Errorf("%s are not served", gvr.Resource))
	}
	out, code, _, err := o.s.updateObject(ctx, e, ns, name, sub, dry, mutate)
	return out, code, err
}

func (o objects) Update(ctx context.Context, ns, name, sub string, dry bool, mutate func(runtime.Object) (runtime.Object, error)) (runtime.Object, int, error) {
	out, code, _, err := o.s.updateObject(ctx, o.e, ns, name, sub, dry, mutate)
	return out, code, err
}

func (o objects) Delete(ctx context.Context, ns, name string, opts *metav1.DeleteOptions, dry bool) (runtime.Object, int, error) {
	return o.s.deleteObject(ctx, o.e, ns, name, opts, dry)
}

func (o objects) Now() time.Time { return o.s.now() }

type notServedError schema.GroupVersionResource

func (e notServedError) Error() string {
	return schema.GroupVersionResource(e).Resource + " are not served"
}

func errNotServed(gvr schema.GroupVersionResource) error { return notServedError(gvr) }

// requestBody decodes a subresource request's body for its handler.
type requestBody struct{ r *http.Request }

func (b requestBody) Decode(obj runtime.Object, gvk schema.GroupVersionKind, opts registry.DecodeOptions) error {
	fv := validationIgnore
	var body []byte
	var err error
	if opts.Strict {
		fv, body, err = readWriteBody(b.r)
	} else {
		body, err = readBody(b.r)
	}
	if err != nil || (len(body) == 0 && opts.Optional) {
		return err
	}
	_, err = decodeRequest(b.r.Header.Get("Content-Type"), body, obj, gvk, fv)
	return err
}

// serveHandler serves a subresource the resource registered a handler for.
func (s *Server) serveHandler(ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo, e *entry, h *registry.Handler) error {
	if h.Verbs != nil && !containsString(h.Verbs, ri.Verb) {
		return apierrors.NewMethodNotSupported(schema.GroupResource{Group: e.store.gr.Group, Resource: e.res.Plural + "/" + h.Name}, ri.Verb)
	}
	req := &registry.HandlerRequest{
		Verb: ri.Verb, Namespace: ri.Namespace, Name: ri.Name, Subresource: h.Name,
		Path: r.URL.Path, Query: r.URL.Query(), RawQuery: r.URL.RawQuery,
		Objects: objects{s, e}, Body: requestBody{r},
		DryRun: func() (bool, error) { return isDryRun(r) },
	}
	switch {
	case h.Connect != nil:
		if err := s.admitConnect(ctx, e, h.Name, ri.Namespace, ri.Name, req); err != nil {
			return err
		}
		t, err := s.transports()
		if err != nil {
			return err
		}
		loc, err := h.Connect(ctx, req)
		if err != nil {
			return err
		}
		if loc.Backend == registry.BackendPod {
			s.proxyHTTP(w, r, loc.URL, t.pod, loc.DialError)
			return nil
		}
		s.forward(w, r, loc.URL, nodeTransport(t.node, h.Name, ri.Name), loc.DialError)
		return nil
	case h.Serve != nil:
		out, code, err := h.Serve(ctx, req)
		if err != nil {
			return err
		}
		writeObject(w, r, code, out)
		return nil
	}
	// Declared for discovery, served by Config.Extra: not configured here.
	return notFoundPath()
}

// upgradeCreateCheck is the extra authorization a GET of a subresource whose handler
// says GetIsCreate needs (WebSocket exec, attach, port-forward): create, as its SPDY
// (POST) form does, so that read access to pods never runs commands.
func (s *Server) upgradeCreateCheck(req Request) (Request, bool) {
	if req.Verb != "get" || req.Subresource == "" {
		return req, false
	}
	for _, e := range s.routes.Load().entries {
		if e.res.GVK.Group != req.APIGroup || e.res.Plural != req.Resource {
			continue
		}
		if h := e.res.FindHandler(req.Subresource); h != nil && h.GetIsCreate {
			req.Verb = "create"
			return req, true
		}
	}
	return req, false
}

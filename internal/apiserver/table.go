package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tranche/tranche/internal/registry"
)

// wantsTable reports whether the client asked for a meta.k8s.io Table (kubectl get).
func wantsTable(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		p := strings.ReplaceAll(part, " ", "")
		if strings.Contains(p, "as=Table") && strings.Contains(p, "g=meta.k8s.io") {
			return true
		}
	}
	return false
}

// partialMetadata is obj reduced to its metadata, as served to metadata clients.
func partialMetadata(obj runtime.Object) *metav1.PartialObjectMetadata {
	m, _ := meta.Accessor(obj)
	om := objectMetaOf(m)
	om.ManagedFields = m.GetManagedFields()
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: "meta.k8s.io/v1"},
		ObjectMeta: *om,
	}
}

func (s *Server) writeMaybeTable(w http.ResponseWriter, r *http.Request, e *entry, obj runtime.Object) error {
	if wanted, protobuf := metadataFormat(r); wanted {
		writeEncoded(w, http.StatusOK, partialMetadata(obj), protobuf)
		return nil
	}
	if wantsTable(r) {
		m, _ := meta.Accessor(obj)
		rv, _ := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
		return s.writeTable(w, r, e, []runtime.Object{obj}, rv, "", nil)
	}
	writeObject(w, r, http.StatusOK, obj)
	return nil
}

// tableFor converts objects into a Table with the resource's columns.
func (s *Server) tableFor(r *http.Request, e *entry, items []runtime.Object, withColumns bool) (*metav1.Table, error) {
	include := r.URL.Query().Get("includeObject")
	if include == "" {
		include = string(metav1.IncludeMetadata)
	}
	if include != string(metav1.IncludeNone) && include != string(metav1.IncludeMetadata) && include != string(metav1.IncludeObject) {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("includeObject must be one of None, Metadata, Object; got %q", include))
	}
	t := &metav1.Table{TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/v1"}}
	cols := e.res.Columns
	if cols == nil {
		cols = []metav1.TableColumnDefinition{registry.NameColumn, registry.AgeColumn}
	}
	if withColumns {
		t.ColumnDefinitions = cols
	}
	now := s.now()
	t.Rows = make([]metav1.TableRow, 0, len(items))
	for _, obj := range items {
		cells, err := rowCells(e, obj, cols, now)
		if err != nil {
			return nil, err
		}
		row := metav1.TableRow{Cells: cells}
		switch include {
		case string(metav1.IncludeMetadata):
			m, _ := meta.Accessor(obj)
			pom := &metav1.PartialObjectMetadata{
				TypeMeta:   metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: "meta.k8s.io/v1"},
				ObjectMeta: *objectMetaOf(m),
			}
			row.Object = runtime.RawExtension{Object: pom}
		case string(metav1.IncludeObject):
			row.Object = runtime.RawExtension{Object: obj}
		}
		t.Rows = append(t.Rows, row)
	}
	return t, nil
}

// rowCells returns the cells of one row, guarding the resource's Row hook.
func rowCells(e *entry, obj runtime.Object, cols []metav1.TableColumnDefinition, now time.Time) (cells []interface{}, err error) {
	m, _ := meta.Accessor(obj)
	if e.res.Row == nil {
		return []interface{}{m.GetName(), registry.HumanAge(m.GetCreationTimestamp(), now)}, nil
	}
	defer recoverHook(e.res, &err)
	cells = e.res.Row(obj, now)
	if len(cells) != len(cols) {
		return nil, apierrors.NewInternalError(fmt.Errorf("%s table row has %d cells for %d columns", e.res.Plural, len(cells), len(cols)))
	}
	return cells, nil
}

func objectMetaOf(m metav1.Object) *metav1.ObjectMeta {
	if oma, ok := m.(metav1.ObjectMetaAccessor); ok {
		if om, ok := oma.GetObjectMeta().(*metav1.ObjectMeta); ok {
			c := om.DeepCopy()
			c.ManagedFields = nil
			return c
		}
	}
	return &metav1.ObjectMeta{Name: m.GetName(), GenerateName: m.GetGenerateName(), Namespace: m.GetNamespace(), UID: m.GetUID(),
		ResourceVersion: m.GetResourceVersion(), Generation: m.GetGeneration(), CreationTimestamp: m.GetCreationTimestamp(),
		DeletionTimestamp: m.GetDeletionTimestamp(), DeletionGracePeriodSeconds: m.GetDeletionGracePeriodSeconds(),
		Labels: m.GetLabels(), Annotations: m.GetAnnotations(), OwnerReferences: m.GetOwnerReferences(), Finalizers: m.GetFinalizers()}
}

func (s *Server) writeTable(w http.ResponseWriter, r *http.Request, e *entry, items []runtime.Object, rev int64, cont string, remaining *int64) error {
	t, err := s.tableFor(r, e, items, true)
	if err != nil {
		return err
	}
	t.ResourceVersion = strconv.FormatInt(rev, 10)
	t.Continue = cont
	t.RemainingItemCount = remaining
	data, err := json.Marshal(t)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
	return nil
}

// tablelessSubresources are the subresources kube-apiserver serves without a table
// convertor (their REST storage has no ConvertToTable); status and scale have one.
var tablelessSubresources = map[string]bool{"binding": true, "eviction": true, "token": true}

// tableNotAcceptable is the 406 kube-apiserver answers (content negotiation, the
// RequestScope's AllowsMediaTypeTransform) when every Accept clause asks for a Table of an
// endpoint that has no table convertor: the create-only reviews and bindings, and
// pods/binding, pods/eviction and serviceaccounts/token. A clause without "as" (plain
// JSON, YAML, protobuf, */*) or one asking for PartialObjectMetadata can be served.
func tableNotAcceptable(r *http.Request, e *entry, sub string) error {
	if e.res.HasVerb("get") && !tablelessSubresources[sub] {
		return nil
	}
	clauses := acceptClauses(r)
	table := false
	for _, c := range clauses {
		switch {
		case c.as == "":
			return nil
		case c.g == "meta.k8s.io" && (c.as == "PartialObjectMetadata" || c.as == "PartialObjectMetadataList"):
			return nil
		case c.as == "Table":
			table = true
		}
	}
	if !table {
		return nil
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusNotAcceptable, Reason: metav1.StatusReasonNotAcceptable,
		Message: "only the following media types are accepted: " + strings.Join(acceptedMediaTypes, ", "),
	}}
}

// acceptedMediaTypes are the media types the API server encodes objects in, as
// kube-apiserver lists them in a 406.
var acceptedMediaTypes = []string{"application/json", "application/yaml", protobufType}

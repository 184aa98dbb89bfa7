package apiserver

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tranche/tranche/internal/storage"
)

// instrumentedStorage times every storage call as etcd_request_duration_seconds with
// kube-apiserver's labels (operation, group, resource; k8s.io/apiserver's
// storage/etcd3/metrics), the group and resource read from the key.
type instrumentedStorage struct {
	storage.Interface
	latency *prometheus.HistogramVec
}

// newInstrumentedStorage registers etcd_request_duration_seconds with reg and wraps s.
func newInstrumentedStorage(s storage.Interface, reg prometheus.Registerer) (storage.Interface, error) {
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "etcd_request_duration_seconds",
		Help:    "Etcd request latency in seconds for each operation and object type.",
		Buckets: requestBuckets,
	}, []string{"operation", "group", "resource"})
	if err := reg.Register(latency); err != nil {
		return nil, err
	}
	return &instrumentedStorage{Interface: s, latency: latency}, nil
}

// keyResource reads the group and resource from a key or prefix
// (/registry/GROUP/RESOURCE/..., GROUP "core" for the core group).
func keyResource(key string) (group, resource string) {
	parts := strings.SplitN(strings.TrimPrefix(key, "/registry/"), "/", 3)
	if len(parts) < 2 || !strings.HasPrefix(key, "/registry/") {
		return "", ""
	}
	group = parts[0]
	if group == "core" {
		group = ""
	}
	return group, parts[1]
}

func (s *instrumentedStorage) observe(op, key string, start time.Time) {
	g, r := keyResource(key)
	s.latency.WithLabelValues(op, g, r).Observe(time.Since(start).Seconds())
}

func (s *instrumentedStorage) Get(ctx context.Context, key string) (*storage.KeyValue, error) {
	defer s.observe("get", key, time.Now())
	return s.Interface.Get(ctx, key)
}

func (s *instrumentedStorage) List(ctx context.Context, prefix string, opts storage.ListOptions) (*storage.ListResult, error) {
	defer s.observe("listWithCount", prefix, time.Now())
	return s.Interface.List(ctx, prefix, opts)
}

func (s *instrumentedStorage) Create(ctx context.Context, key string, value []byte, ops ...storage.Op) (int64, error) {
	defer s.observe("create", key, time.Now())
	return s.Interface.Create(ctx, key, value, ops...)
}

func (s *instrumentedStorage) Update(ctx context.Context, key string, value []byte, expectRevision int64, ops ...storage.Op) (int64, error) {
	defer s.observe("update", key, time.Now())
	return s.Interface.Update(ctx, key, value, expectRevision, ops...)
}

func (s *instrumentedStorage) Delete(ctx context.Context, key string, expectRevision int64, ops ...storage.Op) (*storage.KeyValue, error) {
	defer s.observe("delete", key, time.Now())
	return s.Interface.Delete(ctx, key, expectRevision, ops...)
}

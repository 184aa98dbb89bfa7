package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/tranche/tranche/internal/storage"
)

// The kubernetes Service's endpoints list the live API servers, reconciled as
// kube-apiserver's lease endpoint reconciler (--endpoint-reconciler-type=lease) does:
// each server keeps a record of its own address in the store and renews it every
// interval; a record not renewed within its TTL is expired and leaves the endpoints.
const (
	// apiLeasePrefix is where the records are kept (upstream's /masterleases/).
	apiLeasePrefix = "/registry/masterleases/"
	// apiLeaseTTL and apiLeaseInterval are upstream's defaults
	// (DefaultEndpointReconcilerTTL, DefaultEndpointReconcilerInterval).
	apiLeaseTTL      = 15 * time.Second
	apiLeaseInterval = 10 * time.Second
)

// apiLease is one server's record under apiLeasePrefix+IP.
type apiLease struct {
	IP         string    `json:"ip"`
	Port       int32     `json:"port"`
	RenewTime  time.Time `json:"renewTime"`
	TTLSeconds int       `json:"ttlSeconds"`
}

func (l apiLease) expired(now time.Time) bool {
	return now.After(l.RenewTime.Add(time.Duration(l.TTLSeconds) * time.Second))
}

// apiEndpoints is one server's lease endpoint reconciler.
type apiEndpoints struct {
	store  storage.Interface
	client kubernetes.Interface
	ip     string
	port   int32
	ttl    time.Duration
	now    func() time.Time
	log    *slog.Logger
}

func newAPIEndpoints(store storage.Interface, client kubernetes.Interface, cfg Config, log *slog.Logger) *apiEndpoints {
	return &apiEndpoints{store: store, client: client, ip: cfg.AdvertiseAddress.String(), port: int32(advertisedPort(cfg)),
		ttl: apiLeaseTTL, now: time.Now, log: log}
}

// renew writes this server's record with a fresh renew time.
func (r *apiEndpoints) renew(ctx context.Context) error {
	key := apiLeasePrefix + r.ip
	data, err := json.Marshal(apiLease{IP: r.ip, Port: r.port, RenewTime: r.now().UTC(), TTLSeconds: int(r.ttl / time.Second)})
	if err != nil {
		return err
	}
	cur, err := r.store.Get(ctx, key)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		_, err = r.store.Create(ctx, key, data)
	case err == nil:
		_, err = r.store.Update(ctx, key, data, cur.ModRevision)
	}
	if err != nil {
		return fmt.Errorf("renewing the API server lease %s: %w", key, err)
	}
	return nil
}

// live lists the addresses of unexpired records, sorted, and deletes expired ones (only
// if unchanged since read: a server that renewed meanwhile keeps its record).
func (r *apiEndpoints) live(ctx context.Context) ([]string, error) {
	res, err := r.store.List(ctx, apiLeasePrefix, storage.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing API server leases: %w", err)
	}
	now := r.now()
	var ips []string
	for _, kv := range res.Items {
		var l apiLease
		if err := json.Unmarshal(kv.Value, &l); err != nil || l.IP == "" {
			r.log.Warn("undecodable API server lease", "key", kv.Key, "err", err)
			continue
		}
		if l.expired(now) {
			if _, err := r.store.Delete(ctx, kv.Key, kv.ModRevision); err != nil && !errors.Is(err, storage.ErrConflict) && !errors.Is(err, storage.ErrNotFound) {
				return nil, fmt.Errorf("deleting the expired API server lease %s: %w", kv.Key, err)
			}
			r.log.Info("API server lease expired: it leaves the kubernetes endpoints", "ip", l.IP)
			continue
		}
		ips = append(ips, l.IP)
	}
	slices.SortFunc(ips, strings.Compare)
	return ips, nil
}

// reconcile renews this server's record and makes the endpoints list the live servers.
func (r *apiEndpoints) reconcile(ctx context.Context) error {
	if err := r.renew(ctx); err != nil {
		return err
	}
	ips, err := r.live(ctx)
	if err != nil {
		return err
	}
	return writeAPIEndpoints(ctx, r.client, ips, r.port)
}

// remove deletes this server's record and rewrites the endpoints without it, as a
// server shutting down does so that clients stop reaching it before it is gone.
func (r *apiEndpoints) remove(ctx context.Context) error {
	if _, err := r.store.Delete(ctx, apiLeasePrefix+r.ip, 0); err != nil && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	ips, err := r.live(ctx)
	if err != nil {
		return err
	}
	return writeAPIEndpoints(ctx, r.client, ips, r.port)
}

// run reconciles every interval until ctx ends. Rewriting also puts back endpoints
// someone changed or deleted.
func (r *apiEndpoints) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := r.reconcile(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("keeping the kubernetes endpoints", "err", err)
		}
	}
}

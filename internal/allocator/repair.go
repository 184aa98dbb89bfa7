package allocator

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	v1 "k8s.io/api/core/v1"

	"github.com/tranche/tranche/internal/apiserver"
	"github.com/tranche/tranche/internal/storage"
)

// ServicesPrefix is where the API server keeps Services.
const ServicesPrefix = "/registry/core/services/"

// Repair makes the allocation keys agree with the stored Services, as after a crash of
// an older version or a hand edit: keys whose owner is gone are freed, and allocations a
// Service holds without a key are recorded (two Services holding the same address are
// reported, the first keeps it). It runs once at start-up, before the API serves.
func (a *Services) Repair(ctx context.Context, log *slog.Logger) error {
	svcs, err := a.Store.List(ctx, ServicesPrefix, storage.ListOptions{})
	if err != nil {
		return fmt.Errorf("repair: listing services: %w", err)
	}
	want := map[string]owner{}
	for _, kv := range svcs.Items {
		var svc v1.Service
		if err := apiserver.DecodeStored(kv.Value, &svc); err != nil {
			log.Warn("repair: undecodable service", "key", kv.Key, "err", err)
			continue
		}
		for k := range held(&svc) {
			if prev, dup := want[k]; dup && prev.UID != string(svc.UID) {
				log.Warn("repair: two services hold the same allocation", "allocation", k,
					"service", svc.Namespace+"/"+svc.Name, "holder", prev.Namespace+"/"+prev.Name)
				continue
			}
			want[k] = owner{svc.Namespace, svc.Name, string(svc.UID)}
		}
	}
	for _, prefix := range []string{IPPrefix, PortPrefix} {
		res, err := a.Store.List(ctx, prefix, storage.ListOptions{})
		if err != nil {
			return fmt.Errorf("repair: listing allocations: %w", err)
		}
		for _, kv := range res.Items {
			var o owner
			_ = json.Unmarshal(kv.Value, &o)
			if w, ok := want[kv.Key]; ok && w.UID == o.UID {
				delete(want, kv.Key)
				continue
			}
			if _, err := a.Store.Delete(ctx, kv.Key, kv.ModRevision); err != nil {
				return fmt.Errorf("repair: freeing %s: %w", kv.Key, err)
			}
			log.Info("repair: freed an allocation no service holds", "allocation", kv.Key)
		}
	}
	for k, o := range want {
		data, _ := json.Marshal(o)
		if _, err := a.Store.Create(ctx, k, data); err != nil {
			return fmt.Errorf("repair: recording %s: %w", k, err)
		}
		log.Info("repair: recorded an allocation", "allocation", k, "service", o.Namespace+"/"+o.Name)
	}
	return nil
}

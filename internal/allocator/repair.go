package allocator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"strings"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tranche/tranche/internal/apiserver"
	"github.com/tranche/tranche/internal/storage"
)

// ServicesPrefix is where the API server keeps Services.
const ServicesPrefix = "/registry/core/services/"

// Repair makes the allocation keys agree with the stored Services, as after a crash of
// an older version or a hand edit: keys whose owner is gone are freed, and allocations a
// Service holds without a key are recorded (two Services holding the same address are
// reported, the first keeps it), and the IPAddress objects agree with the ClusterIPs
// held (made for data written before they were, or deleted by hand). It runs at
// start-up, before the API serves, and then in the elected controller manager
// (RepairLoop).
func (a *Services) Repair(ctx context.Context, log *slog.Logger) error {
	return a.repair(ctx, log, nil)
}

// repair is Repair, calling notAllocated (when not nil) for each held ClusterIP whose
// IPAddress object it had to make again.
func (a *Services) repair(ctx context.Context, log *slog.Logger, notAllocated func(o owner, ip string)) error {
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
	holders := map[string]owner{}
	for k, o := range want {
		if ip, ok := strings.CutPrefix(k, IPPrefix); ok {
			holders[ip] = o
		}
	}
	// Allocations are read as of the Services' revision: keys written since (Services
	// that other API servers create meanwhile) are not judged against an older list.
	for _, prefix := range []string{IPPrefix, PortPrefix} {
		res, err := a.Store.List(ctx, prefix, storage.ListOptions{Revision: svcs.Revision})
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
			if _, err := a.Store.Delete(ctx, kv.Key, kv.ModRevision); skipChanged(err) {
				continue
			} else if err != nil {
				return fmt.Errorf("repair: freeing %s: %w", kv.Key, err)
			}
			log.Info("repair: freed an allocation no service holds", "allocation", kv.Key)
		}
	}
	for k, o := range want {
		data, _ := json.Marshal(o)
		if _, err := a.Store.Create(ctx, k, data); skipChanged(err) {
			continue
		} else if err != nil {
			return fmt.Errorf("repair: recording %s: %w", k, err)
		}
		log.Info("repair: recorded an allocation", "allocation", k, "service", o.Namespace+"/"+o.Name)
	}
	return a.repairIPAddresses(ctx, log, holders, svcs.Revision, notAllocated)
}

// skipChanged is true for errors saying that a key changed since the repair read it:
// another API server wrote it meanwhile, and the repair leaves it to that server.
func skipChanged(err error) bool {
	return errors.Is(err, storage.ErrConflict) || errors.Is(err, storage.ErrNotFound) || errors.Is(err, storage.ErrExists)
}

// repairIPAddresses makes the allocator's IPAddress objects name exactly the ClusterIPs
// held (holders: address → Service): one whose Service no longer holds its address is
// deleted, a held address without one gets one. An IPAddress someone else made is left
// alone. notAllocated (when not nil) hears of each object it makes.
func (a *Services) repairIPAddresses(ctx context.Context, log *slog.Logger, holders map[string]owner, rev int64, notAllocated func(o owner, ip string)) error {
	res, err := a.Store.List(ctx, IPAddressPrefix, storage.ListOptions{Revision: rev})
	if err != nil {
		return fmt.Errorf("repair: listing IPAddress objects: %w", err)
	}
	for _, kv := range res.Items {
		ip := strings.TrimPrefix(kv.Key, IPAddressPrefix)
		var obj networkingv1.IPAddress
		if err := apiserver.DecodeStored(kv.Value, &obj); err != nil {
			log.Warn("repair: undecodable IPAddress", "key", kv.Key, "err", err)
			continue
		}
		h, held := holders[ip]
		ref := obj.Spec.ParentRef
		if obj.Labels[networkingv1.LabelManagedBy] != ManagedBy {
			if held {
				log.Warn("repair: a service holds an address another IPAddress names", "ip", ip, "service", h.Namespace+"/"+h.Name)
				delete(holders, ip)
			}
			continue
		}
		if held && ref != nil && ref.Resource == "services" && ref.Group == "" && ref.Namespace == h.Namespace && ref.Name == h.Name {
			delete(holders, ip)
			continue
		}
		if _, err := a.Store.Delete(ctx, kv.Key, kv.ModRevision); skipChanged(err) {
			continue
		} else if err != nil {
			return fmt.Errorf("repair: deleting IPAddress %s: %w", ip, err)
		}
		log.Info("repair: deleted an IPAddress no service holds", "ip", ip)
	}
	for ip, o := range holders {
		data, err := ipAddressObject(&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name}}, ip, a.now())
		if err != nil {
			return fmt.Errorf("repair: IPAddress %s: %w", ip, err)
		}
		if _, err := a.Store.Create(ctx, IPAddressPrefix+ip, data); skipChanged(err) {
			continue
		} else if err != nil {
			return fmt.Errorf("repair: creating IPAddress %s: %w", ip, err)
		}
		log.Info("repair: created the IPAddress of a held ClusterIP", "ip", ip, "service", o.Namespace+"/"+o.Name)
		if notAllocated != nil {
			notAllocated(o, ip)
		}
	}
	return nil
}

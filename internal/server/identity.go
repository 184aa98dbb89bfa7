package server

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-helpers/apimachinery/lease"
	"k8s.io/utils/clock"
)

// kube-apiserver's identity leases (KEP-1965): every API server keeps a Lease
// kube-system/apiserver-<hash of its hostname>, labelled as an identity lease, renewed
// every 10 seconds with a duration of an hour; expired ones are deleted by any server.
const (
	identityLabel            = "apiserver.kubernetes.io/identity"
	identityLabelValue       = "kube-apiserver"
	identityLeaseDuration    = 3600 // seconds
	identityLeaseRenewPeriod = 10 * time.Second
	identityLeaseGCPeriod    = time.Hour
)

// apiServerID is upstream's APIServerID for hostname: "apiserver-" and the lower-case
// unpadded base32 of the first 16 bytes of its SHA-256.
func apiServerID(hostname string) string {
	sum := sha256.Sum256([]byte(hostname))
	return "apiserver-" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:16]))
}

// startIdentityLease keeps this server's identity lease and deletes expired ones of
// other servers until ctx ends.
func startIdentityLease(ctx context.Context, client kubernetes.Interface, log *slog.Logger) error {
	host, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("identity lease: %w", err)
	}
	id := apiServerID(host)
	holder := id + "_" + string(uuid.NewUUID())
	labels := func(l *coordinationv1.Lease) error {
		if l.Labels == nil {
			l.Labels = map[string]string{}
		}
		l.Labels[identityLabel] = identityLabelValue
		l.Labels[v1.LabelHostname] = host
		return nil
	}
	c := lease.NewController(clock.RealClock{}, client, holder, identityLeaseDuration, nil, identityLeaseRenewPeriod,
		id, metav1.NamespaceSystem, labels)
	go c.Run(ctx)
	go func() {
		t := time.NewTicker(identityLeaseGCPeriod)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := gcIdentityLeases(ctx, client, time.Now()); err != nil && ctx.Err() == nil {
				log.Warn("collecting expired API server identity leases", "err", err)
			}
		}
	}()
	return nil
}

// gcIdentityLeases deletes the identity leases whose renewal is older than their
// duration (a server that is gone), each only if unchanged since listed.
func gcIdentityLeases(ctx context.Context, client kubernetes.Interface, now time.Time) error {
	leases := client.CoordinationV1().Leases(metav1.NamespaceSystem)
	list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: identityLabel + "=" + identityLabelValue})
	if err != nil {
		return err
	}
	for _, l := range list.Items {
		if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
			continue
		}
		if now.Before(l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)) {
			continue
		}
		err := leases.Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &l.ResourceVersion}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("lease %s/%s: %w", l.Namespace, l.Name, err)
		}
	}
	return nil
}

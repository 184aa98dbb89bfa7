package server

import (
	"context"
	"log/slog"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tranche/tranche/internal/logging"
	"github.com/tranche/tranche/internal/quota"
)

// quotaAdmission is kube-apiserver's LimitRanger and ResourceQuota admission: the
// LimitRanger mutates (defaults) and validates, ResourceQuota validates last. Both read
// LimitRanges and ResourceQuotas from informers over this server's loopback client,
// which start is to start once the server listens.
type quotaAdmission struct {
	limits    *quota.LimitRanger
	quota     *quota.ResourceQuota
	informers informers.SharedInformerFactory
}

// newQuotaAdmission builds both plugins over an admin client of the API server at url.
// Their workers stop with ctx.
func newQuotaAdmission(ctx context.Context, url string, caPEM, certPEM, keyPEM []byte, log *slog.Logger) (*quotaAdmission, error) {
	client, err := kubernetes.NewForConfig(logging.QuietWarnings(&rest.Config{
		Host:            url,
		TLSClientConfig: rest.TLSClientConfig{CAData: caPEM, CertData: certPEM, KeyData: keyPEM},
		QPS:             200,
		Burst:           400,
	}, log))
	if err != nil {
		return nil, err
	}
	f := informers.NewSharedInformerFactory(client, 0)
	limits, err := quota.NewLimitRanger(client, f)
	if err != nil {
		return nil, err
	}
	rq, err := quota.NewResourceQuota(ctx, client, f)
	if err != nil {
		return nil, err
	}
	return &quotaAdmission{limits: limits, quota: rq, informers: f}, nil
}

// start starts the informers; until they have synced the plugins look objects up live.
func (q *quotaAdmission) start(ctx context.Context) { q.informers.Start(ctx.Done()) }

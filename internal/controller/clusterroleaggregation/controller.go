// Package clusterroleaggregation is kube-controller-manager's clusterrole-aggregation
// controller: a ClusterRole with an aggregationRule gets, as its rules, the rules of
// every other ClusterRole matched by one of its clusterRoleSelectors (selector by
// selector, matching roles in name order, duplicates dropped). Any ClusterRole event
// re-syncs every aggregated role, since any change may add or remove rules of one;
// an aggregated role that feeds another converges through its own update event.
// Each sync computes the rules (pure) and writes them in one update.
package clusterroleaggregation

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/tranche/tranche/internal/controller/worker"
)

// Config is what New needs.
type Config struct {
	// Client updates the aggregated ClusterRoles.
	Client kubernetes.Interface
	// Informers provides ClusterRoles; the caller starts it after New.
	Informers informers.SharedInformerFactory
	// Logger receives structured logs; nil means slog.Default().
	Logger *slog.Logger
}

// Controller keeps aggregated ClusterRoles' rules current. Create it with New and
// start it with Run.
type Controller struct {
	client kubernetes.Interface
	lister rbaclisters.ClusterRoleLister
	synced cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
	log    *slog.Logger
}

// New builds the controller. It panics when Client or Informers is missing, a wiring
// mistake.
func New(cfg Config) *Controller {
	if cfg.Client == nil || cfg.Informers == nil {
		panic("clusterroleaggregation.New: Client and Informers are required")
	}
	logger, clk, _ := worker.Defaults(cfg.Logger, nil, nil)
	inf := cfg.Informers.Rbac().V1().ClusterRoles()
	c := &Controller{
		client: cfg.Client,
		lister: inf.Lister(),
		synced: inf.Informer().HasSynced,
		queue:  worker.NewQueue("ClusterRoleAggregator", clk),
		log:    logger,
	}
	worker.Watch(inf.Informer(), func(any) { c.enqueueAggregated() })
	return c
}

// Run waits for the cache and syncs with the given number of workers until ctx ends.
// A failed write is retried with backoff for as long as it fails, as upstream does.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Loop{Kind: "ClusterRole", Queue: c.queue, Synced: []cache.InformerSynced{c.synced},
		Sync: c.sync, MaxRetries: math.MaxInt, Logger: c.log}.Run(ctx, workers)
}

// HasSynced reports whether the caches the controller reads are filled: the
// controller manager starts Run once they are.
func (c *Controller) HasSynced() bool { return c.synced() }

// enqueueAggregated queues every ClusterRole that has an aggregationRule.
func (c *Controller) enqueueAggregated() {
	roles, err := c.lister.List(labels.Everything())
	if err != nil {
		c.log.Error("listing cluster roles", "err", err)
		return
	}
	for _, r := range roles {
		if r.AggregationRule != nil {
			c.queue.Add(r.Name)
		}
	}
}

// sync writes the aggregated rules of the ClusterRole named key when they differ from
// its stored rules.
func (c *Controller) sync(ctx context.Context, key string) error {
	role, err := c.lister.Get(key)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if role.AggregationRule == nil {
		return nil
	}
	all, err := c.lister.List(labels.Everything())
	if err != nil {
		return err
	}
	rules, err := Rules(role, all)
	if err != nil {
		return fmt.Errorf("clusterrole %s: %w", role.Name, err)
	}
	if apiequality.Semantic.DeepEqual(rules, role.Rules) {
		return nil
	}
	updated := role.DeepCopy()
	updated.Rules = rules
	if _, err := c.client.RbacV1().ClusterRoles().Update(ctx, updated, metav1.UpdateOptions{FieldManager: "clusterrole-aggregation-controller"}); err != nil {
		return fmt.Errorf("updating clusterrole %s: %w", role.Name, err)
	}
	c.log.Info("aggregated rules written", "clusterrole", role.Name, "rules", len(rules))
	return nil
}

// Rules returns the rules role aggregates from all (the cluster's ClusterRoles): for
// each of its clusterRoleSelectors in order, the stored rules of every other role the
// selector matches, roles in name order, each rule kept once. The result is never nil,
// so a role that aggregates nothing is written with an empty rule list, as upstream.
// A selector that is not valid is an error.
func Rules(role *rbacv1.ClusterRole, all []*rbacv1.ClusterRole) ([]rbacv1.PolicyRule, error) {
	rules := []rbacv1.PolicyRule{}
	if role.AggregationRule == nil {
		return rules, nil
	}
	sorted := slices.Clone(all)
	slices.SortFunc(sorted, func(a, b *rbacv1.ClusterRole) int { return strings.Compare(a.Name, b.Name) })
	for i := range role.AggregationRule.ClusterRoleSelectors {
		sel, err := metav1.LabelSelectorAsSelector(&role.AggregationRule.ClusterRoleSelectors[i])
		if err != nil {
			return nil, err
		}
		for _, other := range sorted {
			if other.Name == role.Name || !sel.Matches(labels.Set(other.Labels)) {
				continue
			}
			for _, r := range other.Rules {
				if !slices.ContainsFunc(rules, func(have rbacv1.PolicyRule) bool { return apiequality.Semantic.DeepEqual(have, r) }) {
					rules = append(rules, r)
				}
			}
		}
	}
	return rules, nil
}

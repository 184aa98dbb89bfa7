package server

import (
	"context"
	"log/slog"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/tranche/tranche/internal/controller/namespace"
	"github.com/tranche/tranche/internal/controller/serviceaccount"
)

// startControllers starts the control-plane controllers in this process; they stop
// when ctx ends.
func startControllers(ctx context.Context, cfg *rest.Config, log *slog.Logger) error {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	sa := serviceaccount.New(client, factory, log.With("controller", "serviceaccount"))
	ns := namespace.New(namespace.Config{Client: client, Metadata: meta, Discovery: disc, Logger: log.With("controller", "namespace")})
	factory.Start(ctx.Done())
	go sa.Run(ctx)
	go ns.Run(ctx, 2)
	return nil
}

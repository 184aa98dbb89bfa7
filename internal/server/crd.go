package server

import (
	"context"
	"log/slog"

	"k8s.io/client-go/rest"

	"github.com/tranche/tranche/internal/apiserver"
	"github.com/tranche/tranche/internal/clusterdial"
	"github.com/tranche/tranche/internal/crd"
)

// startCRDs serves the custom resources of the CustomResourceDefinitions in storage
// from api, and keeps doing so as definitions change, before the server reports ready;
// their schemas are published in openapi.
func startCRDs(ctx context.Context, api *apiserver.Server, loop *rest.Config, openapi *crd.OpenAPI, dial clusterdial.DialFunc, log *slog.Logger) error {
	c, err := crd.New(api, loop, openapi, log)
	if err != nil {
		return err
	}
	c.Dial = dial // conversion webhooks are pods on the cluster network
	return c.Start(ctx)
}

package crd

import (
	"context"
	"fmt"

	"github.com/tranche/tranche/internal/clusterdial"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// converters builds the conversion of definitions whose strategy is Webhook with
// apiextensions-apiserver's converter (ConversionReview v1 or v1beta1 as the definition
// lists them, the caBundle, a service reference's path and port, or a URL). A service is
// reached at one of its ready endpoints, as kube-apiserver routes webhooks, dialled from
// the cluster network.
type converters struct {
	factory *conversion.CRConverterFactory
}

// newConverters starts the Service and EndpointSlice informers the service resolver
// reads (until ctx ends) and returns the converter factory; dial reaches cluster
// addresses (nil dials directly, for loopback webhooks in tests).
func newConverters(ctx context.Context, cfg *rest.Config, dial clusterdial.DialFunc) (*converters, error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	resolver, synced, err := clusterdial.NewEndpointResolver(factory)
	if err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil, fmt.Errorf("conversion webhooks: service caches not synced")
	}
	f, err := conversion.NewCRConverterFactory(resolver, clusterdial.Wrapper(dial))
	if err != nil {
		return nil, err
	}
	return &converters{factory: f}, nil
}

// convertFunc returns crd's conversion for apiserver.DynamicOptions.Convert: nil for
// strategy None (the store rewrites apiVersion), else its webhook.
func (c *converters) convertFunc(crd *apiextv1.CustomResourceDefinition) (func(runtime.Object, schema.GroupVersion) (runtime.Object, error), error) {
	if c == nil || crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextv1.WebhookConverter {
		return nil, nil
	}
	_, unsafe, err := c.factory.NewConverter(crd)
	if err != nil {
		return nil, err
	}
	return func(obj runtime.Object, to schema.GroupVersion) (runtime.Object, error) {
		return unsafe.ConvertToVersion(obj, to)
	}, nil
}

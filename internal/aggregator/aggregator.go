// Package aggregator runs, in every API server, what kube-aggregator runs beside
// apiregistration.k8s.io: the registration of a Local APIService for each built-in group
// version (once, at start) and for each served version of a CustomResourceDefinition
// (continuously), and the controllers that keep the APIServices' Available condition,
// for Local ones and for those backed by a Service (whose discovery document is fetched
// over TLS with the APIService's caBundle, presenting the front-proxy client
// certificate). The controllers are kube-aggregator's own.
package aggregator

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/tranche/tranche/internal/clusterdial"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/transport"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	aggregatorinformers "k8s.io/kube-aggregator/pkg/client/informers/externalversions"
	"k8s.io/kube-aggregator/pkg/controllers/autoregister"
	local "k8s.io/kube-aggregator/pkg/controllers/status/local"
	availabilitymetrics "k8s.io/kube-aggregator/pkg/controllers/status/metrics"
	"k8s.io/kube-aggregator/pkg/controllers/status/remote"
	"k8s.io/kubernetes/pkg/controlplane/controller/crdregistration"
)

// Config is what Start needs.
type Config struct {
	// Loopback is the API server's own client configuration.
	Loopback *rest.Config
	// Dial reaches cluster addresses (the pods behind an APIService's Service); nil
	// dials directly, which only tests reaching loopback servers may do.
	Dial clusterdial.DialFunc
	Log  *slog.Logger
	// Proxy, when set, starts proxying to the APIServices backed by a Service once
	// the caches are synced.
	Proxy *Proxy
}

// Start registers the Local APIServices of the group versions the server serves now
// (its discovery), then keeps the definitions' APIServices and every APIService's
// Available condition until ctx ends. It returns once its caches are synced.
func Start(ctx context.Context, cfg Config) error {
	client, err := aggregatorclient.NewForConfig(cfg.Loopback)
	if err != nil {
		return fmt.Errorf("aggregator: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg.Loopback)
	if err != nil {
		return fmt.Errorf("aggregator: %w", err)
	}
	extClient, err := apiextclient.NewForConfig(cfg.Loopback)
	if err != nil {
		return fmt.Errorf("aggregator: %w", err)
	}
	groups, err := kube.Discovery().ServerGroups()
	if err != nil {
		return fmt.Errorf("aggregator: discovering the served group versions: %w", err)
	}

	// kube-aggregator resyncs APIServices every 5 minutes, and the availability
	// controllers recheck every 30 seconds on their own.
	factory := aggregatorinformers.NewSharedInformerFactory(client, 5*time.Minute)
	apiServices := factory.Apiregistration().V1().APIServices()
	kubeFactory := informers.NewSharedInformerFactory(kube, 0)
	extFactory := apiextinformers.NewSharedInformerFactory(extClient, 0)

	auto := autoregister.NewAutoRegisterController(apiServices, client.ApiregistrationV1())
	for _, gv := range builtinGroupVersions(groups) {
		auto.AddAPIServiceToSyncOnStart(localAPIService(gv))
	}
	crds := crdregistration.NewCRDRegistrationController(extFactory.Apiextensions().V1().CustomResourceDefinitions(), auto)

	metrics := availabilitymetrics.New()
	localAvail, err := local.New(apiServices, client.ApiregistrationV1(), metrics)
	if err != nil {
		return fmt.Errorf("aggregator: %w", err)
	}
	services := kubeFactory.Core().V1().Services()
	slices := kubeFactory.Discovery().V1().EndpointSlices()
	resolver, _, err := clusterdial.NewEndpointResolver(kubeFactory)
	if err != nil {
		return fmt.Errorf("aggregator: %w", err)
	}
	var dial *transport.DialHolder
	if cfg.Dial != nil {
		dial = &transport.DialHolder{Dial: cfg.Dial}
	}
	// The availability checks present the proxy's client certificate, as
	// kube-aggregator's do, for servers that authenticate their discovery requests.
	var proxyCert func() ([]byte, []byte)
	if cfg.Proxy != nil {
		proxyCert = func() ([]byte, []byte) { return cfg.Proxy.ClientCert, cfg.Proxy.ClientKey }
	}
	remoteAvail, err := remote.New(apiServices, services, slices, client.ApiregistrationV1(), dial, proxyCert, resolver, metrics)
	if err != nil {
		return fmt.Errorf("aggregator: %w", err)
	}

	factory.Start(ctx.Done())
	kubeFactory.Start(ctx.Done())
	extFactory.Start(ctx.Done())
	for _, synced := range []cache.InformerSynced{apiServices.Informer().HasSynced, services.Informer().HasSynced,
		slices.Informer().HasSynced} {
		if !cache.WaitForCacheSync(ctx.Done(), synced) {
			return fmt.Errorf("aggregator: caches not synced")
		}
	}
	if cfg.Proxy != nil {
		cfg.Proxy.state.Store(&proxyState{apiServices: apiServices.Lister(), resolver: resolver, dial: dial})
	}
	go auto.Run(1, ctx.Done())
	go crds.Run(1, ctx.Done())
	go localAvail.Run(1, ctx.Done())
	go remoteAvail.Run(1, ctx.Done())
	cfg.Log.Info("aggregator started", "builtinAPIServices", len(builtinGroupVersions(groups)))
	return nil
}

// builtinGroupVersions are the served group versions that have a built-in priority.
func builtinGroupVersions(groups *metav1.APIGroupList) []schema.GroupVersion {
	var out []schema.GroupVersion
	for _, g := range groups.Groups {
		for _, v := range g.Versions {
			gv := schema.GroupVersion{Group: g.Name, Version: v.Version}
			if _, ok := builtinPriorities[gv]; ok {
				out = append(out, gv)
			}
		}
	}
	return out
}

// localAPIService is the APIService of a built-in group version, named version.group
// ("v1." for the core group) as kube-apiserver names it.
func localAPIService(gv schema.GroupVersion) *apiregv1.APIService {
	p := builtinPriorities[gv]
	return &apiregv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: gv.Version + "." + gv.Group},
		Spec: apiregv1.APIServiceSpec{Group: gv.Group, Version: gv.Version,
			GroupPriorityMinimum: p.group, VersionPriority: p.version},
	}
}

package aggregator

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/transport"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregv1helper "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
	"k8s.io/kube-aggregator/pkg/controllers/status/remote"

	"github.com/tranche/tranche/internal/apiserver"
)

// discoveryTTL is how long an extension server's resource list is reused before it is
// fetched again.
const discoveryTTL = 30 * time.Second

// discoveryCache keeps the resource lists fetched from extension servers, by APIService
// name.
type discoveryCache struct {
	mu      sync.Mutex
	entries map[string]cachedList
}

type cachedList struct {
	resourceVersion string
	at              time.Time
	list            *metav1.APIResourceList
}

// Discovery implements apiserver.Aggregated: the group versions of the available
// APIServices backed by a Service, by kube's priority order (groupPriorityMinimum, then
// versionPriority, highest first), with the resource lists their servers answer at
// /apis/GROUP/VERSION (fetched as kube-aggregator does, as system:kube-aggregator in
// system:masters).
func (p *Proxy) Discovery() []apiserver.AggregatedGroupVersion {
	st := p.state.Load()
	if st == nil {
		return nil
	}
	all, err := st.apiServices.List(labels.Everything())
	if err != nil {
		return nil
	}
	var remote []*apiregv1.APIService
	for _, a := range all {
		if a.Spec.Service != nil && apiregv1helper.IsAPIServiceConditionTrue(a, apiregv1.Available) {
			remote = append(remote, a)
		}
	}
	sort.Slice(remote, func(i, j int) bool {
		a, b := remote[i].Spec, remote[j].Spec
		if a.GroupPriorityMinimum != b.GroupPriorityMinimum {
			return a.GroupPriorityMinimum > b.GroupPriorityMinimum
		}
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.VersionPriority != b.VersionPriority {
			return a.VersionPriority > b.VersionPriority
		}
		return a.Version < b.Version
	})
	out := make([]apiserver.AggregatedGroupVersion, 0, len(remote))
	for _, a := range remote {
		out = append(out, apiserver.AggregatedGroupVersion{
			GroupVersion: schema.GroupVersion{Group: a.Spec.Group, Version: a.Spec.Version},
			Resources:    p.resources(st, a),
		})
	}
	return out
}

// resources returns a's resource list, fetched at most every discoveryTTL (and again
// when the APIService changed); nil when its server could not answer.
func (p *Proxy) resources(st *proxyState, a *apiregv1.APIService) *metav1.APIResourceList {
	p.discovery.mu.Lock()
	defer p.discovery.mu.Unlock()
	if c, ok := p.discovery.entries[a.Name]; ok && c.resourceVersion == a.ResourceVersion && time.Since(c.at) < discoveryTTL {
		return c.list
	}
	list, err := fetchResources(st, a, p.ClientCert, p.ClientKey)
	if err != nil {
		list = nil
	}
	if p.discovery.entries == nil {
		p.discovery.entries = map[string]cachedList{}
	}
	p.discovery.entries[a.Name] = cachedList{resourceVersion: a.ResourceVersion, at: time.Now(), list: list}
	return list
}

func fetchResources(st *proxyState, a *apiregv1.APIService, cert, key []byte) (*metav1.APIResourceList, error) {
	svc := a.Spec.Service
	port := int32(443)
	if svc.Port != nil {
		port = *svc.Port
	}
	loc, err := st.resolver.ResolveEndpoint(svc.Namespace, svc.Name, port)
	if err != nil {
		return nil, err
	}
	rt, err := transport.New(remote.BuildTransportConfig(st.dial, cert, key, a))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	loc.Path = "/apis/" + a.Spec.Group + "/" + a.Spec.Version
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, loc.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	transport.SetAuthProxyHeaders(req, "system:kube-aggregator", "", []string{"system:masters"}, nil)
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %d", loc, resp.StatusCode)
	}
	list := &metav1.APIResourceList{}
	if err := json.NewDecoder(resp.Body).Decode(list); err != nil {
		return nil, fmt.Errorf("%s: %w", loc, err)
	}
	return list, nil
}

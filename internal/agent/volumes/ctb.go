package volumes

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"sort"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
)

// clusterTrustBundleFiles returns the file of a clusterTrustBundle projection, as
// kubelet writes it: the trust anchors of the bundle named by p.Name, or of every
// bundle of p.SignerName whose labels match p.LabelSelector (a nil selector matches
// none, an empty one all), deduplicated and PEM-encoded. A bundle that does not exist,
// or a signer and selector that match none, is an error unless p.Optional, which
// writes an empty file instead. The anchors are sorted (kubelet shuffles them once per
// restart), so that an unchanged set never rewrites the volume.
func (m *Manager) clusterTrustBundleFiles(ctx context.Context, p *v1.ClusterTrustBundleProjection, mode int32) (map[string]fileProjection, error) {
	optional := ptr.Deref(p.Optional, false)
	var bundles []certificatesv1.ClusterTrustBundle
	switch {
	case p.Name != nil:
		b, err := m.client.CertificatesV1().ClusterTrustBundles().Get(ctx, *p.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) && optional:
		case err != nil:
			return nil, fmt.Errorf("while getting ClusterTrustBundle: %w", err)
		default:
			bundles = append(bundles, *b)
		}
	case p.SignerName != nil:
		sel, err := metav1.LabelSelectorAsSelector(p.LabelSelector)
		if err != nil {
			return nil, fmt.Errorf("while parsing label selector: %w", err)
		}
		list, err := m.client.CertificatesV1().ClusterTrustBundles().List(ctx, metav1.ListOptions{
			FieldSelector: "spec.signerName=" + *p.SignerName, LabelSelector: sel.String()})
		if err != nil {
			return nil, fmt.Errorf("while listing ClusterTrustBundles matching label selector %v: %w", p.LabelSelector, err)
		}
		for _, b := range list.Items {
			if b.Spec.SignerName == *p.SignerName && sel.Matches(labels.Set(b.Labels)) {
				bundles = append(bundles, b)
			}
		}
		if len(bundles) == 0 && !optional {
			return nil, errors.New("combination of signerName and labelSelector matched zero ClusterTrustBundles")
		}
	default:
		return nil, errors.New("ClusterTrustBundle projection requires either name or signerName to be set")
	}
	return map[string]fileProjection{p.Path: {Data: trustAnchors(bundles), Mode: mode}}, nil
}

// trustAnchors returns the distinct PEM blocks of the bundles, sorted, each
// re-encoded as a CERTIFICATE block.
func trustAnchors(bundles []certificatesv1.ClusterTrustBundle) []byte {
	seen := map[string]bool{}
	for _, b := range bundles {
		rest := []byte(b.Spec.TrustBundle)
		for {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil {
				break
			}
			seen[string(block.Bytes)] = true
		}
	}
	ders := make([]string, 0, len(seen))
	for d := range seen {
		ders = append(ders, d)
	}
	sort.Strings(ders)
	out := []byte{}
	for _, d := range ders {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte(d)})...)
	}
	return out
}

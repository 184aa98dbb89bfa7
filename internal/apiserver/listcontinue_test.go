package apiserver

import (
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A continue token whose revision has been compacted away gets 410 Expired with a token
// that lists the remainder, from the same key, at the newest revision: the list is then
// inconsistent (it shows what changed in between), as with kube-apiserver's etcd3 store.
func TestListContinueAfterCompaction(t *testing.T) {
	f := newFixture(t)
	cms := f.client.CoreV1().ConfigMaps("default")
	for i := range 6 {
		if _, err := cms.Create(f.ctx, makeConfigMap(fmt.Sprintf("cm-%d", i), nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := cms.List(f.ctx, metav1.ListOptions{Limit: 2})
	if err != nil || len(first.Items) != 2 || first.Continue == "" {
		t.Fatalf("first page: %v %+v", err, first)
	}
	// Changes after the first page: one deleted item ahead, one added.
	if err := cms.Delete(f.ctx, "cm-3", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Create(f.ctx, makeConfigMap("cm-9", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rev, _ := f.store.Revision(f.ctx)
	if err := f.store.Compact(f.ctx, rev); err != nil {
		t.Fatal(err)
	}

	_, err = cms.List(f.ctx, metav1.ListOptions{Limit: 2, Continue: first.Continue})
	st, ok := err.(apierrors.APIStatus)
	if !apierrors.IsResourceExpired(err) || !ok || st.Status().Continue == "" || st.Status().Message != inconsistentContinue {
		t.Fatalf("continue at a compacted revision: want 410 Expired with a continue token, got %v", err)
	}
	token := st.Status().Continue

	var names []string
	var rvs []string
	opts := metav1.ListOptions{Limit: 2, Continue: token}
	for {
		page, err := cms.List(f.ctx, opts)
		if err != nil {
			t.Fatalf("continuing with the inconsistent token: %v", err)
		}
		for _, cm := range page.Items {
			names = append(names, cm.Name)
		}
		rvs = append(rvs, page.ResourceVersion)
		if page.Continue == "" {
			if page.RemainingItemCount != nil {
				t.Errorf("last page has remainingItemCount %d", *page.RemainingItemCount)
			}
			break
		}
		if page.RemainingItemCount == nil {
			t.Errorf("page with a continue token lacks remainingItemCount")
		}
		opts.Continue = page.Continue
	}
	if fmt.Sprint(names) != "[cm-2 cm-4 cm-5 cm-9]" {
		t.Errorf("remainder: got %v, want [cm-2 cm-4 cm-5 cm-9] (the newest state from the first page's last key)", names)
	}
	for _, rv := range rvs {
		if rv == first.ResourceVersion || rv != rvs[0] {
			t.Errorf("pages after the inconsistent token: resourceVersions %v, want one newer than the first page's %s", rvs, first.ResourceVersion)
			break
		}
	}
	// The token without the revision it needs is refused as any malformed token.
	if _, err := cms.List(f.ctx, metav1.ListOptions{Limit: 2, Continue: encodeContinue(-2, "cm-2")}); !apierrors.IsBadRequest(err) {
		t.Errorf("token with revision -2: want 400, got %v", err)
	}
}

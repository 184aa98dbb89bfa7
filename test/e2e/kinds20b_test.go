package e2e

import (
	"context"
	"encoding/json"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// TestServiceCIDRs: the default ServiceCIDR "kubernetes" holds the cluster's service
// range and is Ready, readable through /status as the conformance spec reads it;
// another ServiceCIDR gets the protection finalizer and Ready, keeps its CIDRs, and goes
// when deleted since no address of it is in use; kubectl prints NAME CIDRS AGE.
func TestServiceCIDRs(t *testing.T) {
	c := up(t)
	s := c.srv
	ctx := context.Background()
	client := s.client(t)
	api := client.NetworkingV1().ServiceCIDRs()

	var def *networkingv1.ServiceCIDR
	eventually(t, 30*time.Second, "default ServiceCIDR Ready", func() (bool, string) {
		var err error
		if def, err = api.Get(ctx, "kubernetes", metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		return apimeta.IsStatusConditionTrue(def.Status.Conditions, "Ready"), jsonOf(def.Status)
	})
	svc, err := client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(def.Spec.CIDRs) != 1 || !netip.MustParsePrefix(def.Spec.CIDRs[0]).Contains(netip.MustParseAddr(svc.Spec.ClusterIP)) {
		t.Fatalf("default ServiceCIDR %v does not hold the kubernetes Service's %s", def.Spec.CIDRs, svc.Spec.ClusterIP)
	}
	dyn := dynamic.NewForConfigOrDie(s.restConfig(t))
	st, err := dyn.Resource(networkingv1.SchemeGroupVersion.WithResource("servicecidrs")).Get(ctx, "kubernetes", metav1.GetOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	if st.GetKind() != "ServiceCIDR" || st.GetUID() != def.UID {
		t.Fatalf("servicecidrs/kubernetes/status: kind %q uid %q, want ServiceCIDR %q", st.GetKind(), st.GetUID(), def.UID)
	}

	s.must(t, "apply", "-f", "testdata/servicecidr-extra.yaml")
	t.Cleanup(func() {
		_, _, _ = s.kubectl(t, "", "delete", "servicecidr", "e2e-extra", "--ignore-not-found", "--wait=false")
	})
	eventually(t, 30*time.Second, "e2e-extra Ready with the finalizer", func() (bool, string) {
		got, err := api.Get(ctx, "e2e-extra", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return apimeta.IsStatusConditionTrue(got.Status.Conditions, "Ready") &&
			slices.Contains(got.Finalizers, "networking.k8s.io/service-cidr-finalizer"), jsonOf(got)
	})
	out := s.must(t, "get", "servicecidrs")
	if !regexp.MustCompile(`(?m)^NAME\s+CIDRS\s+AGE$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^e2e-extra\s+203\.0\.113\.0/24,2001:db8:cb00::/64\s+\S+$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^kubernetes\s+`+regexp.QuoteMeta(def.Spec.CIDRs[0])+`\s+\S+$`).MatchString(out) {
		t.Fatalf("kubectl get servicecidrs:\n%s", out)
	}
	if _, errOut, err := s.kubectl(t, "", "patch", "servicecidr", "e2e-extra", "--type=merge", "-p", `{"spec":{"cidrs":["203.0.114.0/24","2001:db8:cb00::/64"]}}`); err == nil ||
		!strings.Contains(errOut, `spec.cidrs[0]: Invalid value: "203.0.114.0/24": field is immutable`) {
		t.Fatalf("changing a CIDR: err %v\n%s", err, errOut)
	}
	bad := "apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: e2e-bad}\nspec: {cidrs: [10.0.0.0/24, 10.1.0.0/24]}\n"
	if _, errOut, err := s.kubectl(t, bad, "create", "-f", "-"); err == nil || !strings.Contains(errOut, "may specify no more than one IP for each IP family") {
		t.Fatalf("two IPv4 CIDRs: err %v\n%s", err, errOut)
	}
	s.must(t, "delete", "servicecidr", "e2e-extra", "--wait=false")
	eventually(t, 60*time.Second, "e2e-extra gone after its grace period", func() (bool, string) {
		got, err := api.Get(ctx, "e2e-extra", metav1.GetOptions{})
		if err != nil {
			return strings.Contains(err.Error(), "not found"), err.Error()
		}
		return false, jsonOf(got)
	})
}

// TestIPAddressAPI runs the IPAddress operations of the conformance spec "should support
// IPAddress API operations": create (IPv4 and IPv6 names), merge patch, update, list and
// watch by label, delete and deletecollection; a name that is no canonical address is
// refused, and kubectl prints NAME PARENTREF.
func TestIPAddressAPI(t *testing.T) {
	c := up(t)
	s := c.srv
	ctx := context.Background()
	api := s.client(t).NetworkingV1().IPAddresses()
	ref := &networkingv1.ParentReference{Group: "mygroup", Resource: "myresources", Namespace: "foo", Name: "bar"}
	mk := func(name, kind string) *networkingv1.IPAddress {
		return &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"e2e-type": kind}},
			Spec: networkingv1.IPAddressSpec{ParentRef: ref}}
	}
	t.Cleanup(func() {
		_ = api.DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "e2e-type"})
	})
	created, err := api.Create(ctx, mk("255.255.255.255", "broadcast"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.Create(ctx, mk("fe80::42:1dff:fe84:f9e2", "link-local"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patched, err := api.Patch(ctx, created.Name, types.MergePatchType, []byte(`{"metadata":{"annotations":{"patched":"true"}}}`), metav1.PatchOptions{})
	if err != nil || patched.Annotations["patched"] != "true" || patched.ResourceVersion == created.ResourceVersion {
		t.Fatalf("patch: %v %+v", err, patched)
	}
	patched.Annotations["updated"] = "true"
	if updated, err := api.Update(ctx, patched, metav1.UpdateOptions{}); err != nil || updated.Annotations["updated"] != "true" {
		t.Fatalf("update: %v", err)
	}
	list, err := api.List(ctx, metav1.ListOptions{LabelSelector: "e2e-type=broadcast"})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list by label: %v %d items", err, len(list.Items))
	}
	w, err := api.Watch(ctx, metav1.ListOptions{LabelSelector: "e2e-type=broadcast"})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	out := s.must(t, "get", "ipaddresses", "-l", "e2e-type")
	if !regexp.MustCompile(`(?m)^NAME\s+PARENTREF$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^255\.255\.255\.255\s+myresources\.mygroup/foo/bar$`).MatchString(out) {
		t.Fatalf("kubectl get ipaddresses:\n%s", out)
	}
	bad := "apiVersion: networking.k8s.io/v1\nkind: IPAddress\nmetadata: {name: 010.0.0.1}\nspec: {parentRef: {resource: services, name: x}}\n"
	if _, errOut, err := s.kubectl(t, bad, "create", "-f", "-"); err == nil || !strings.Contains(errOut, `metadata.name: Invalid value: "010.0.0.1"`) {
		t.Fatalf("non-canonical name: err %v\n%s", err, errOut)
	}
	if err := api.Delete(ctx, created.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := api.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "e2e-type=link-local"}); err != nil {
		t.Fatal(err)
	}
	if list, err := api.List(ctx, metav1.ListOptions{LabelSelector: "e2e-type"}); err != nil || len(list.Items) != 0 {
		t.Fatalf("after deletecollection: %v %d items", err, len(list.Items))
	}
}

// jsonOf renders v for a failure message.
func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	svmv1 "k8s.io/api/storagemigration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// TestCSIKinds runs the storage.k8s.io/v1 operations the conformance specs for
// CSIDriver, CSINode, CSIStorageCapacity and VolumeAttachment run: create (a second
// create is AlreadyExists), strategic and merge patches, updates, lists by label across
// namespaces, deletecollection; CSIDriver defaults and its immutable attachRequired;
// VolumeAttachment's status subresource (status dropped on create, patched and updated
// through /status); and the columns kubectl prints for each.
func TestCSIKinds(t *testing.T) {
	c := up(t)
	s := c.srv
	ctx := context.Background()
	client := s.client(t)
	ns := s.namespace(t)
	sel := metav1.ListOptions{LabelSelector: "e2e-csi=" + ns}
	labels := map[string]string{"e2e-csi": ns}

	drivers := client.StorageV1().CSIDrivers()
	t.Cleanup(func() { _ = drivers.DeleteCollection(context.Background(), metav1.DeleteOptions{}, sel) })
	d1 := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: ns + ".one.csi.k8s.io", Labels: labels},
		Spec: storagev1.CSIDriverSpec{VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral}}}
	got, err := drivers.Create(ctx, d1, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Generation != 1 || got.Spec.AttachRequired == nil || !*got.Spec.AttachRequired || got.Spec.FSGroupPolicy == nil ||
		*got.Spec.FSGroupPolicy != storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy {
		t.Fatalf("created CSIDriver not defaulted: %s", jsonOf(got))
	}
	if _, err := drivers.Create(ctx, d1, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: %v, want AlreadyExists", err)
	}
	d2 := d1.DeepCopy()
	d2.Name = ns + ".two.csi.k8s.io"
	d2.Spec.VolumeLifecycleModes = append(d2.Spec.VolumeLifecycleModes, storagev1.VolumeLifecyclePersistent)
	if _, err := drivers.Create(ctx, d2, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patched, err := drivers.Patch(ctx, d2.Name, types.StrategicMergePatchType, []byte(`{"metadata":{"labels":{"patched":"yes"}}}`), metav1.PatchOptions{})
	if err != nil || patched.Labels["patched"] != "yes" {
		t.Fatalf("strategic patch: %v", err)
	}
	out := s.must(t, "get", "csidrivers", "-l", "e2e-csi="+ns)
	if !regexp.MustCompile(`(?m)^NAME\s+ATTACHREQUIRED\s+PODINFOONMOUNT\s+STORAGECAPACITY\s+TOKENREQUESTS\s+REQUIRESREPUBLISH\s+MODES\s+AGE$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(d2.Name)+`\s+true\s+false\s+false\s+<unset>\s+false\s+Ephemeral,Persistent\s+\S+$`).MatchString(out) {
		t.Fatalf("kubectl get csidrivers:\n%s", out)
	}
	if _, errOut, err := s.kubectl(t, "", "patch", "csidriver", d1.Name, "--type=merge", "-p", `{"spec":{"attachRequired":false}}`); err == nil ||
		!strings.Contains(errOut, "spec.attachedRequired: Invalid value: false: field is immutable") {
		t.Fatalf("changing attachRequired: err %v\n%s", err, errOut)
	}
	if list, err := drivers.List(ctx, sel); err != nil || len(list.Items) != 2 {
		t.Fatalf("list by label: %v", err)
	}
	if err := drivers.Delete(ctx, d1.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := drivers.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "patched=yes"}); err != nil {
		t.Fatal(err)
	}
	if list, err := drivers.List(ctx, sel); err != nil || len(list.Items) != 0 {
		t.Fatalf("after deletecollection: %v", err)
	}

	csiNodes := client.StorageV1().CSINodes()
	t.Cleanup(func() { _ = csiNodes.DeleteCollection(context.Background(), metav1.DeleteOptions{}, sel) })
	cn := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: ns + "-csinode", Labels: labels},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: "hostpath.csi.k8s.io", NodeID: "n1"}}}}
	if _, err := csiNodes.Create(ctx, cn, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := csiNodes.Patch(ctx, cn.Name, types.StrategicMergePatchType, []byte(`{"metadata":{"labels":{"patched":"yes"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	out = s.must(t, "get", "csinodes", cn.Name)
	if !regexp.MustCompile(`(?m)^NAME\s+DRIVERS\s+AGE$`).MatchString(out) || !regexp.MustCompile(`(?m)^`+cn.Name+`\s+1\s+\S+$`).MatchString(out) {
		t.Fatalf("kubectl get csinodes:\n%s", out)
	}
	if _, errOut, err := s.kubectl(t, "", "patch", "csinode", cn.Name, "--type=json", "-p", `[{"op":"replace","path":"/spec/drivers/0/nodeID","value":"n2"}]`); err == nil ||
		!strings.Contains(errOut, "spec.drivers: Invalid value") || !strings.Contains(errOut, "field is immutable") {
		t.Fatalf("changing a driver's nodeID: err %v\n%s", err, errOut)
	}
	if err := csiNodes.DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
		t.Fatal(err)
	}

	capacities := client.StorageV1().CSIStorageCapacities(ns)
	w, err := client.StorageV1().CSIStorageCapacities("").Watch(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	csc := &storagev1.CSIStorageCapacity{ObjectMeta: metav1.ObjectMeta{Name: "csc1", Labels: labels}, StorageClassName: "standard",
		Capacity: new(resource.MustParse("10Gi"))}
	if _, err := capacities.Create(ctx, csc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := capacities.Create(ctx, csc, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: %v, want AlreadyExists", err)
	}
	select {
	case ev := <-w.ResultChan():
		if got, ok := ev.Object.(*storagev1.CSIStorageCapacity); !ok || ev.Type != "ADDED" || got.Name != "csc1" {
			t.Fatalf("watch across namespaces: %s %s", ev.Type, jsonOf(ev.Object))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no watch event for the new CSIStorageCapacity")
	}
	out = s.must(t, "get", "csistoragecapacities", "-n", ns)
	if !regexp.MustCompile(`(?m)^NAME\s+STORAGECLASSNAME\s+CAPACITY$`).MatchString(out) || !regexp.MustCompile(`(?m)^csc1\s+standard\s+10Gi$`).MatchString(out) {
		t.Fatalf("kubectl get csistoragecapacities:\n%s", out)
	}
	if _, errOut, err := s.kubectl(t, "", "patch", "csistoragecapacity", "csc1", "-n", ns, "--type=merge", "-p", `{"storageClassName":"fast"}`); err == nil ||
		!strings.Contains(errOut, `storageClassName: Invalid value: "fast": field is immutable`) {
		t.Fatalf("changing storageClassName: err %v\n%s", err, errOut)
	}

	vas := client.StorageV1().VolumeAttachments()
	t.Cleanup(func() { _ = vas.DeleteCollection(context.Background(), metav1.DeleteOptions{}, sel) })
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: ns + "-va", Labels: labels},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "e2e-test.storage.k8s.io", NodeName: "node-1",
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: new("pv-" + ns)}},
		Status: storagev1.VolumeAttachmentStatus{Attached: true}}
	created, err := vas.Create(ctx, va, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Status.Attached {
		t.Fatal("status kept on create")
	}
	dyn := dynamic.NewForConfigOrDie(s.restConfig(t))
	st, err := dyn.Resource(storagev1.SchemeGroupVersion.WithResource("volumeattachments")).Get(ctx, va.Name, metav1.GetOptions{}, "status")
	if err != nil || st.GetUID() != created.UID {
		t.Fatalf("get /status: %v", err)
	}
	patchedVA, err := vas.Patch(ctx, va.Name, types.MergePatchType, []byte(`{"status":{"attached":true}}`), metav1.PatchOptions{}, "status")
	if err != nil || !patchedVA.Status.Attached {
		t.Fatalf("patch /status: %v", err)
	}
	if _, err := vas.Patch(ctx, va.Name, types.MergePatchType, []byte(`{"spec":{"nodeName":"node-2"}}`), metav1.PatchOptions{}); err == nil {
		t.Fatal("spec change accepted")
	}
	out = s.must(t, "get", "volumeattachments", va.Name)
	if !regexp.MustCompile(`(?m)^NAME\s+ATTACHER\s+PV\s+NODE\s+ATTACHED\s+AGE$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^`+va.Name+`\s+e2e-test\.storage\.k8s\.io\s+pv-`+ns+`\s+node-1\s+true\s+\S+$`).MatchString(out) {
		t.Fatalf("kubectl get volumeattachments:\n%s", out)
	}
	patchedVA.Status.Attached = false
	if updated, err := vas.UpdateStatus(ctx, patchedVA, metav1.UpdateOptions{}); err != nil || updated.Status.Attached {
		t.Fatalf("update /status: %v", err)
	}
	if err := vas.Delete(ctx, va.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestFlowControl: the bootstrap FlowSchemas and PriorityLevelConfigurations exist,
// each FlowSchema says in its Dangling condition that its level exists, a mandatory
// object's spec cannot change, and the operations of the conformance specs "should
// support FlowSchema API operations" and "... PriorityLevelConfiguration API
// operations" work: generated names, list and watch by label from a resourceVersion,
// merge patch and update of spec, /status get, patch and update; kubectl prints
// upstream's columns.
func TestFlowControl(t *testing.T) {
	c := up(t)
	s := c.srv
	ctx := context.Background()
	client := s.client(t)
	fsAPI := client.FlowcontrolV1().FlowSchemas()
	plAPI := client.FlowcontrolV1().PriorityLevelConfigurations()

	eventually(t, 60*time.Second, "catch-all FlowSchema found its level", func() (bool, string) {
		fs, err := fsAPI.Get(ctx, "catch-all", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range fs.Status.Conditions {
			if c.Type == "Dangling" && c.Status == "False" && c.Reason == "Found" {
				return true, ""
			}
		}
		return false, jsonOf(fs.Status)
	})
	out := s.must(t, "get", "flowschemas")
	if !regexp.MustCompile(`(?m)^NAME\s+PRIORITYLEVEL\s+MATCHINGPRECEDENCE\s+DISTINGUISHERMETHOD\s+AGE\s+MISSINGPL$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^exempt\s+exempt\s+1\s+<none>\s+\S+\s+(False|\?)$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^catch-all\s+catch-all\s+10000\s+ByUser\s+\S+\s+False$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^global-default\s+global-default\s+9900\s+ByUser\s+`).MatchString(out) {
		t.Fatalf("kubectl get flowschemas:\n%s", out)
	}
	out = s.must(t, "get", "prioritylevelconfigurations")
	if !regexp.MustCompile(`(?m)^NAME\s+TYPE\s+NOMINALCONCURRENCYSHARES\s+QUEUES\s+HANDSIZE\s+QUEUELENGTHLIMIT\s+AGE$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^exempt\s+Exempt\s+<none>\s+<none>\s+<none>\s+<none>\s+\S+$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^catch-all\s+Limited\s+5\s+<none>\s+<none>\s+<none>\s+\S+$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^global-default\s+Limited\s+20\s+128\s+6\s+50\s+\S+$`).MatchString(out) {
		t.Fatalf("kubectl get prioritylevelconfigurations:\n%s", out)
	}
	if _, errOut, err := s.kubectl(t, "", "patch", "flowschema", "catch-all", "--type=merge", "-p", `{"spec":{"matchingPrecedence":9000}}`); err == nil ||
		!strings.Contains(errOut, "spec of 'catch-all' must equal the fixed value") {
		t.Fatalf("changing the mandatory catch-all: err %v\n%s", err, errOut)
	}

	label := "e2e-fc=" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	labels := map[string]string{"e2e-fc": strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))}
	t.Cleanup(func() {
		_ = fsAPI.DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: label})
		_ = plAPI.DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: label})
	})
	fsTemplate := &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-example-fs-", Labels: labels},
		Spec: flowcontrolv1.FlowSchemaSpec{MatchingPrecedence: 10000,
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "global-default"},
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects:         []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "example-e2e-non-existent-user"}}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
			}}}}
	var fsCreated *flowcontrolv1.FlowSchema
	for range 3 {
		var err error
		if fsCreated, err = fsAPI.Create(ctx, fsTemplate, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	list, err := fsAPI.List(ctx, metav1.ListOptions{LabelSelector: label})
	if err != nil || len(list.Items) != 3 {
		t.Fatalf("list: %v, %d items", err, len(list.Items))
	}
	w, err := fsAPI.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion, LabelSelector: label})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	patched, err := fsAPI.Patch(ctx, fsCreated.Name, types.MergePatchType, []byte(`{"metadata":{"annotations":{"patched":"true"}},"spec":{"matchingPrecedence":9999}}`), metav1.PatchOptions{})
	if err != nil || patched.Spec.MatchingPrecedence != 9999 || patched.Generation != 2 {
		t.Fatalf("patch: %v %s", err, jsonOf(patched))
	}
	for saw := false; !saw; {
		select {
		case ev := <-w.ResultChan():
			fs, ok := ev.Object.(*flowcontrolv1.FlowSchema)
			if ev.Type != "MODIFIED" || !ok {
				t.Fatalf("watch: %s %s", ev.Type, jsonOf(ev.Object))
			}
			saw = fs.Annotations["patched"] == "true"
		case <-time.After(30 * time.Second):
			t.Fatal("no watch event with the patched annotation")
		}
	}
	dyn := dynamic.NewForConfigOrDie(s.restConfig(t))
	st, err := dyn.Resource(flowcontrolv1.SchemeGroupVersion.WithResource("flowschemas")).Get(ctx, fsCreated.Name, metav1.GetOptions{}, "status")
	if err != nil || st.GetKind() != "FlowSchema" || st.GetUID() != fsCreated.UID {
		t.Fatalf("get /status: %v", err)
	}
	statusPatched, err := fsAPI.Patch(ctx, fsCreated.Name, types.MergePatchType,
		[]byte(`{"status":{"conditions":[{"type":"PatchStatusFailed","status":"False","reason":"e2e"}]}}`), metav1.PatchOptions{}, "status")
	if err != nil || !slices.ContainsFunc(statusPatched.Status.Conditions, func(c flowcontrolv1.FlowSchemaCondition) bool { return c.Type == "PatchStatusFailed" }) {
		t.Fatalf("patch /status: %v", err)
	}
	eventually(t, 30*time.Second, "status update", func() (bool, string) {
		fs, err := fsAPI.Get(ctx, fsCreated.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		fs.Status.Conditions = append(fs.Status.Conditions, flowcontrolv1.FlowSchemaCondition{Type: "StatusUpdateFailed", Status: "False", Reason: "E2E"})
		_, err = fsAPI.UpdateStatus(ctx, fs, metav1.UpdateOptions{})
		return err == nil, fmt.Sprint(err)
	})
	if err := fsAPI.Delete(ctx, fsCreated.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := fsAPI.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: label}); err != nil {
		t.Fatal(err)
	}

	plTemplate := &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-example-pl-", Labels: labels},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: new(int32(2)),
				LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}}}}
	pl, err := plAPI.Create(ctx, plTemplate, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pl.Spec.Limited.LendablePercent == nil || *pl.Spec.Limited.LendablePercent != 0 {
		t.Fatalf("lendablePercent not defaulted: %s", jsonOf(pl.Spec))
	}
	plPatched, err := plAPI.Patch(ctx, pl.Name, types.MergePatchType, []byte(`{"spec":{"limited":{"nominalConcurrencyShares":4}}}`), metav1.PatchOptions{})
	if err != nil || *plPatched.Spec.Limited.NominalConcurrencyShares != 4 {
		t.Fatalf("patch: %v", err)
	}
	if _, err := plAPI.Patch(ctx, pl.Name, types.MergePatchType, []byte(`{"status":{"conditions":[{"type":"PatchStatusFailed","status":"False","reason":"e2e"}]}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("patch /status: %v", err)
	}
	bad := `{"spec":{"limited":{"limitResponse":{"type":"Queue","queuing":{"queues":4,"handSize":5}}}}}`
	if _, err := plAPI.Patch(ctx, pl.Name, types.MergePatchType, []byte(bad), metav1.PatchOptions{}); err == nil ||
		!strings.Contains(err.Error(), "spec.limited.limitResponse.queuing.handSize: Invalid value: 5: should not be greater than queues (4)") {
		t.Fatalf("hand size above queues: %v", err)
	}
}

// csrPEM returns a PEM certificate request for cn and a self-signed PEM certificate.
func csrPEM(t *testing.T, cn string) (request, certificate []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn}, DNSNames: []string{cn}}, key)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: now, NotAfter: now.Add(time.Hour)}
	cert, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert})
}

// TestCertificateSigningRequests: the operations of the conformance spec "should
// support CSR API operations" (generated names, a field selector on spec.signerName,
// watch, patch and update, /approval and /status get, patch and update); the requester
// recorded from the credentials, not the body; kubectl certificate approve and deny
// and the columns of kubectl get csr; a user who may write /approval but not approve
// for the signer is refused as kube-apiserver's CertificateApproval plugin refuses.
func TestCertificateSigningRequests(t *testing.T) {
	c := up(t)
	s := c.srv
	ctx := context.Background()
	api := s.client(t).CertificatesV1().CertificateSigningRequests()
	ns := s.namespace(t)
	signer := "example.com/e2e-" + ns
	request, certificate := csrPEM(t, "e2e.example.com")
	t.Cleanup(func() {
		_ = api.DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{FieldSelector: "spec.signerName=" + signer})
	})
	template := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-example-csr-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: request, SignerName: signer, ExpirationSeconds: new(int32(3600)),
			Username: "forged", Groups: []string{"forged"},
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth}}}
	var created *certificatesv1.CertificateSigningRequest
	for range 3 {
		var err error
		if created, err = api.Create(ctx, template, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if created.Spec.Username == "forged" || created.Spec.Username == "" || slices.Contains(created.Spec.Groups, "forged") {
		t.Fatalf("requester taken from the body: %s", jsonOf(created.Spec))
	}
	list, err := api.List(ctx, metav1.ListOptions{FieldSelector: "spec.signerName=" + signer})
	if err != nil || len(list.Items) != 3 {
		t.Fatalf("list by spec.signerName: %v", err)
	}
	w, err := api.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion, FieldSelector: "metadata.name=" + created.Name})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	patched, err := api.Patch(ctx, created.Name, types.MergePatchType, []byte(`{"metadata":{"annotations":{"patched":"true"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patched.Annotations["updated"] = "true"
	if _, err := api.Update(ctx, patched, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		if got, ok := ev.Object.(*certificatesv1.CertificateSigningRequest); ev.Type != "MODIFIED" || !ok || got.Annotations["patched"] != "true" {
			t.Fatalf("watch: %s %s", ev.Type, jsonOf(ev.Object))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no watch event")
	}

	dyn := dynamic.NewForConfigOrDie(s.restConfig(t)).Resource(certificatesv1.SchemeGroupVersion.WithResource("certificatesigningrequests"))
	for _, sub := range []string{"approval", "status"} {
		got, err := dyn.Get(ctx, created.Name, metav1.GetOptions{}, sub)
		if err != nil || got.GetKind() != "CertificateSigningRequest" || got.GetUID() != created.UID {
			t.Fatalf("get /%s: %v", sub, err)
		}
	}
	pa, err := api.Patch(ctx, created.Name, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"patchedapproval":"true"}},"status":{"conditions":[{"type":"ApprovalPatch","status":"True","reason":"e2e"}]}}`), metav1.PatchOptions{}, "approval")
	if err != nil || len(pa.Status.Conditions) != 1 || pa.Status.Conditions[0].Type != "ApprovalPatch" || pa.Annotations["patchedapproval"] != "true" {
		t.Fatalf("patch /approval: %v %s", err, jsonOf(pa))
	}
	pa.Status.Conditions = append(pa.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateApproved,
		Status: "True", Reason: "E2E", Message: "Set from an e2e test"})
	ua, err := api.UpdateApproval(ctx, pa.Name, pa, metav1.UpdateOptions{})
	if err != nil || len(ua.Status.Conditions) != 2 || ua.Status.Conditions[1].Type != certificatesv1.CertificateApproved {
		t.Fatalf("update /approval: %v %s", err, jsonOf(ua))
	}
	certJSON, _ := json.Marshal(certificate)
	ps, err := api.Patch(ctx, created.Name, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"patchedstatus":"true"}},"status":{"certificate":`+string(certJSON)+`}}`), metav1.PatchOptions{}, "status")
	if err != nil || !bytes.Equal(ps.Status.Certificate, certificate) || ps.Annotations["patchedstatus"] != "true" {
		t.Fatalf("patch /status: %v", err)
	}
	ps.Status.Conditions = append(ps.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: "StatusUpdate", Status: "True", Reason: "E2E"})
	us, err := api.UpdateStatus(ctx, ps, metav1.UpdateOptions{})
	if err != nil || len(us.Status.Conditions) != 3 || us.Status.Conditions[2].Type != "StatusUpdate" {
		t.Fatalf("update /status: %v", err)
	}
	out := s.must(t, "get", "csr", created.Name)
	if !regexp.MustCompile(`(?m)^NAME\s+AGE\s+SIGNERNAME\s+REQUESTOR\s+REQUESTEDDURATION\s+CONDITION$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^`+created.Name+`\s+\S+\s+`+regexp.QuoteMeta(signer)+`\s+`+regexp.QuoteMeta(created.Spec.Username)+`\s+60m\s+Approved,Issued$`).MatchString(out) {
		t.Fatalf("kubectl get csr:\n%s", out)
	}

	desc := s.must(t, "describe", "csr", created.Name)
	for _, re := range []string{`(?m)^Requesting User:\s+` + regexp.QuoteMeta(created.Spec.Username) + `$`, `(?m)^Signer:\s+` + regexp.QuoteMeta(signer) + `$`,
		`(?m)^Requested Duration:\s+60m$`, `(?m)^Status:\s+Approved,Issued$`, `(?m)^\s+Common Name:\s+e2e\.example\.com$`} {
		if !regexp.MustCompile(re).MatchString(desc) {
			t.Fatalf("kubectl describe csr does not match %s:\n%s", re, desc)
		}
	}

	// kubectl certificate approve and deny.
	var others []string
	for _, item := range list.Items {
		if item.Name != created.Name {
			others = append(others, item.Name)
		}
	}
	toApprove, toDeny := others[0], others[1]
	s.must(t, "certificate", "deny", toDeny)
	if got := s.must(t, "get", "csr", toDeny, "-o", "jsonpath={.status.conditions[0].type} {.status.conditions[0].reason}"); got != "Denied KubectlDeny" {
		t.Fatalf("after kubectl certificate deny: %q", got)
	}

	// jane may write /approval but holds no approve on the signer: refused by admission.
	role := `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: e2e-csr-approval-writer}
rules:
- {apiGroups: [certificates.k8s.io], resources: [certificatesigningrequests], verbs: [get, list]}
- {apiGroups: [certificates.k8s.io], resources: [certificatesigningrequests/approval], verbs: [update]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: e2e-csr-approval-writer}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: e2e-csr-approval-writer}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: e2e-jane}]
`
	s.mustStdin(t, role, "apply", "-f", "-")
	t.Cleanup(func() {
		_, _, _ = s.kubectl(t, "", "delete", "clusterrole,clusterrolebinding", "e2e-csr-approval-writer", "e2e-csr-signer-approver", "--ignore-not-found")
	})
	if _, errOut, err := s.kubectl(t, "", "certificate", "approve", toApprove, "--as=e2e-jane"); err == nil ||
		!strings.Contains(errOut, `user not permitted to approve requests with signerName "`+signer+`"`) {
		t.Fatalf("approve without the signer's approve verb: err %v\n%s", err, errOut)
	}
	approver := `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: e2e-csr-signer-approver}
rules:
- {apiGroups: [certificates.k8s.io], resources: [signers], verbs: [approve], resourceNames: ["example.com/*"]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: e2e-csr-signer-approver}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: e2e-csr-signer-approver}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: e2e-jane}]
`
	s.mustStdin(t, approver, "apply", "-f", "-")
	if got := s.must(t, "get", "clusterrole", "system:certificates.k8s.io:kube-apiserver-client-approver", "-o", "jsonpath={.rules[0].verbs} {.rules[0].resources} {.rules[0].resourceNames}"); got != `["approve"] ["signers"] ["kubernetes.io/kube-apiserver-client"]` {
		t.Fatalf("bootstrap approver role: %q", got)
	}
	eventually(t, 30*time.Second, "jane approves with the domain's wildcard", func() (bool, string) {
		out, errOut, err := s.kubectl(t, "", "certificate", "approve", toApprove, "--as=e2e-jane")
		return err == nil, out + errOut
	})
	out = s.must(t, "get", "csr", "--field-selector", "spec.signerName="+signer)
	if !regexp.MustCompile(`(?m)^`+toApprove+`\s+.*\s+Approved$`).MatchString(out) || !regexp.MustCompile(`(?m)^`+toDeny+`\s+.*\s+Denied$`).MatchString(out) {
		t.Fatalf("kubectl get csr after approve and deny:\n%s", out)
	}

	if err := api.Delete(ctx, created.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := api.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{FieldSelector: "spec.signerName=" + signer}); err != nil {
		t.Fatal(err)
	}
	if list, err := api.List(ctx, metav1.ListOptions{FieldSelector: "spec.signerName=" + signer}); err != nil || len(list.Items) != 0 {
		t.Fatalf("after deletecollection: %v", err)
	}
}

// mustStdin runs kubectl with stdin and fails the test when it fails.
func (s *server) mustStdin(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, errOut, err := s.kubectl(t, stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, errOut)
	}
	return out
}

// resourceCase is one kind run through the steps of the conformance framework's
// TestResource (k8s.io/kubernetes test/e2e/framework/conformance): create with strict
// field validation, get, update, status update and get, each patch type on the object
// and on its status (a fresh object each time), list and deletecollection by label.
type resourceCase struct {
	gvr        schema.GroupVersionResource
	kind       string
	namespaced bool
	initial    string // JSON of the object without metadata
	update     func(u *unstructured.Unstructured)
	// status changes status for the status update; nil when there is no status.
	status                     func(u *unstructured.Unstructured)
	specPatches, statusPatches map[types.PatchType]string
}

func runResourceCase(t *testing.T, s *server, ns string, tc resourceCase) {
	t.Helper()
	ctx := context.Background()
	dyn := dynamic.NewForConfigOrDie(s.restConfig(t)).Resource(tc.gvr)
	var client dynamic.ResourceInterface = dyn
	name := "test-" + ns
	if tc.namespaced {
		client, name = dyn.Namespace(ns), "test"
	}
	label := "e2e-test.kubernetes.io=" + ns
	fresh := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal([]byte(tc.initial), &u.Object); err != nil {
			t.Fatal(err)
		}
		u.SetAPIVersion(tc.gvr.GroupVersion().String())
		u.SetKind(tc.kind)
		u.SetName(name)
		u.SetLabels(map[string]string{"e2e-test.kubernetes.io": ns})
		return u
	}
	create := func() *unstructured.Unstructured {
		t.Helper()
		got, err := client.Create(ctx, fresh(), metav1.CreateOptions{FieldValidation: "Strict"})
		if err != nil {
			t.Fatalf("%s: create: %v", tc.gvr.Resource, err)
		}
		return got
	}
	remove := func() {
		t.Helper()
		if err := client.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("%s: delete: %v", tc.gvr.Resource, err)
		}
		eventually(t, 30*time.Second, tc.gvr.Resource+" gone", func() (bool, string) {
			_, err := client.Get(ctx, name, metav1.GetOptions{})
			return err != nil && strings.Contains(err.Error(), "not found"), fmt.Sprint(err)
		})
	}
	t.Cleanup(func() { _ = client.Delete(context.Background(), name, metav1.DeleteOptions{}) })

	obj := create()
	if _, err := client.Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Fatalf("%s: get: %v", tc.gvr.Resource, err)
	}
	tc.update(obj)
	obj, err := client.Update(ctx, obj, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("%s: update: %v", tc.gvr.Resource, err)
	}
	if tc.status != nil {
		tc.status(obj)
		if obj, err = client.UpdateStatus(ctx, obj, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("%s: update status: %v", tc.gvr.Resource, err)
		}
		if _, err := client.Get(ctx, name, metav1.GetOptions{}, "status"); err != nil {
			t.Fatalf("%s: get status: %v", tc.gvr.Resource, err)
		}
	}
	for _, step := range []struct {
		patches     map[types.PatchType]string
		subresource []string
	}{{tc.specPatches, nil}, {tc.statusPatches, []string{"status"}}} {
		for pt, data := range step.patches {
			remove()
			obj := create()
			if len(step.subresource) > 0 {
				tc.update(obj)
				if _, err := client.Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
					t.Fatalf("%s: update before the status patch: %v", tc.gvr.Resource, err)
				}
			}
			body := []byte(data)
			if pt != types.JSONPatchType {
				patch := &unstructured.Unstructured{}
				if err := json.Unmarshal([]byte(data), &patch.Object); err != nil {
					t.Fatal(err)
				}
				patch.SetAPIVersion(tc.gvr.GroupVersion().String())
				patch.SetKind(tc.kind)
				patch.SetName(name)
				if tc.namespaced {
					patch.SetNamespace(ns)
				}
				patch.SetUID(obj.GetUID())
				body, _ = patch.MarshalJSON()
			}
			opts := metav1.PatchOptions{FieldValidation: "Strict"}
			if pt == types.ApplyPatchType {
				opts.FieldManager, opts.Force = "test-apply", new(true)
			}
			if _, err := client.Patch(ctx, name, pt, body, opts, step.subresource...); err != nil {
				t.Fatalf("%s: %s patch %v: %v", tc.gvr.Resource, pt, step.subresource, err)
			}
		}
	}
	list, err := client.List(ctx, metav1.ListOptions{LabelSelector: label})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("%s: list by label: %v", tc.gvr.Resource, err)
	}
	if err := client.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: label}); err != nil {
		t.Fatalf("%s: deletecollection: %v", tc.gvr.Resource, err)
	}
	eventually(t, 30*time.Second, tc.gvr.Resource+" collection gone", func() (bool, string) {
		list, err := client.List(ctx, metav1.ListOptions{LabelSelector: label})
		return err == nil && len(list.Items) == 0, fmt.Sprint(err)
	})
}

func addLabel(u *unstructured.Unstructured) {
	l := u.GetLabels()
	l["test.example.com"] = "test"
	u.SetLabels(l)
}

var labelPatches = map[types.PatchType]string{
	types.ApplyPatchType:          `{"metadata": {"labels": {"test.example.com": "test"}}}`,
	types.StrategicMergePatchType: `{"metadata": {"labels": {"test.example.com": "test"}}}`,
	types.MergePatchType:          `{"metadata": {"labels": {"test.example.com": "test"}}}`,
	types.JSONPatchType:           `[{"op": "add", "path": "/metadata/labels/test.example.com", "value": "test"}]`,
}

// TestStorageVersionMigrationAndDRAKinds runs the conformance specs' resource tests for
// storagemigration.k8s.io/v1 StorageVersionMigration and the resource.k8s.io/v1 kinds
// (DeviceClass, DeviceTaintRule, ResourceClaim, ResourceClaimTemplate, ResourceSlice),
// then checks a few refusals and the columns kubectl prints.
func TestStorageVersionMigrationAndDRAKinds(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	cond := `{"type": "TestCondition", "status": "True", "reason": "TestReason", "message": "TestMessage", "lastTransitionTime": "2026-01-01T00:00:00Z"}`
	statusPatches := func(status string) map[types.PatchType]string {
		return map[types.PatchType]string{
			types.ApplyPatchType:          `{"status": ` + status + `}`,
			types.StrategicMergePatchType: `{"status": ` + status + `}`,
			types.MergePatchType:          `{"status": ` + status + `}`,
		}
	}
	setConditions := func(u *unstructured.Unstructured) {
		var c map[string]any
		_ = json.Unmarshal([]byte(cond), &c)
		_ = unstructured.SetNestedSlice(u.Object, []any{c}, "status", "conditions")
	}
	resource := func(r string) schema.GroupVersionResource { return resourcev1.SchemeGroupVersion.WithResource(r) }
	for _, tc := range []resourceCase{
		{gvr: svmv1.SchemeGroupVersion.WithResource("storageversionmigrations"), kind: "StorageVersionMigration", initial: `{"spec": {"resource": {"group": "", "resource": "foo"}}}`,
			update: addLabel, status: setConditions, specPatches: labelPatches, statusPatches: statusPatches(`{"conditions": [` + cond + `]}`)},
		{gvr: resource("deviceclasses"), kind: "DeviceClass", initial: `{"spec": {"selectors": [{"cel": {"expression": "false"}}]}}`,
			update: func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"cel": map[string]any{"expression": "1 == 0"}}}, "spec", "selectors")
			},
			specPatches: map[types.PatchType]string{types.StrategicMergePatchType: `{"spec": {"selectors": [{"cel": {"expression": "1 == 0"}}]}}`}},
		{gvr: resource("devicetaintrules"), kind: "DeviceTaintRule", initial: `{"spec": {"taint": {"key": "testing", "effect": "None"}}}`,
			update: func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "NoExecute", "spec", "taint", "effect")
			},
			status: setConditions, specPatches: map[types.PatchType]string{types.StrategicMergePatchType: `{"spec": {"taint": {"effect": "NoExecute"}}}`},
			statusPatches: map[types.PatchType]string{types.StrategicMergePatchType: `{"status": {"conditions": [` + cond + `]}}`}},
		{gvr: resource("resourceclaims"), kind: "ResourceClaim", namespaced: true,
			initial: `{"spec": {"devices": {"requests": [{"name": "req-0", "exactly": {"deviceClassName": "dra.example.com"}}]}}}`,
			update:  addLabel, status: func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedMap(u.Object, map[string]any{}, "status", "allocation")
			},
			specPatches: labelPatches, statusPatches: statusPatches(`{"allocation": {}}`)},
		{gvr: resource("resourceclaimtemplates"), kind: "ResourceClaimTemplate", namespaced: true,
			initial: `{"spec": {"spec": {"devices": {"requests": [{"name": "req-0", "exactly": {"deviceClassName": "dra.example.com"}}]}}}}`,
			update:  addLabel, specPatches: map[types.PatchType]string{types.StrategicMergePatchType: labelPatches[types.StrategicMergePatchType]}},
		{gvr: resource("resourceslices"), kind: "ResourceSlice",
			initial: `{"spec": {"driver": "dra.example.com", "pool": {"name": "cluster", "generation": 1, "resourceSliceCount": 1}, "nodeName": "no-such-node"}}`,
			update: func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "device-0"}}, "spec", "devices")
			},
			specPatches: map[types.PatchType]string{types.StrategicMergePatchType: `{"spec": {"devices": [{"name": "device-0"}]}}`}},
	} {
		t.Run(tc.gvr.Resource, func(t *testing.T) { runResourceCase(t, s, ns, tc) })
	}

	claim := `apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: gpu}
spec: {devices: {requests: [{name: req-0, exactly: {deviceClassName: dra.example.com}}]}}
`
	s.mustStdin(t, claim, "apply", "-n", ns, "-f", "-")
	out := s.must(t, "get", "resourceclaims", "-n", ns)
	if !regexp.MustCompile(`(?m)^NAME\s+STATE\s+AGE$`).MatchString(out) || !regexp.MustCompile(`(?m)^gpu\s+pending\s+\S+$`).MatchString(out) {
		t.Fatalf("kubectl get resourceclaims:\n%s", out)
	}
	if got := s.must(t, "get", "resourceclaim", "gpu", "-n", ns, "-o", "jsonpath={.spec.devices.requests[0].exactly.allocationMode} {.spec.devices.requests[0].exactly.count}"); got != "ExactCount 1" {
		t.Fatalf("defaults: %q", got)
	}
	if _, errOut, err := s.kubectl(t, "", "patch", "resourceclaim", "gpu", "-n", ns, "--type=json", "-p", `[{"op":"replace","path":"/spec/devices/requests/0/name","value":"req-1"}]`); err == nil ||
		!strings.Contains(errOut, "spec: Invalid value") || !strings.Contains(errOut, "field is immutable") {
		t.Fatalf("changing a claim's spec: err %v\n%s", err, errOut)
	}
	bad := "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: bad-" + ns + "}\nspec: {driver: dra.example.com, pool: {name: p, resourceSliceCount: 1}}\n"
	if _, errOut, err := s.kubectl(t, bad, "create", "-f", "-"); err == nil ||
		!strings.Contains(errOut, "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required") {
		t.Fatalf("slice without a node: err %v\n%s", err, errOut)
	}
	svm := "apiVersion: storagemigration.k8s.io/v1\nkind: StorageVersionMigration\nmetadata: {name: e2e-" + ns + "}\nspec: {resource: {group: apps, resource: deployments}}\n"
	s.mustStdin(t, svm, "create", "-f", "-")
	t.Cleanup(func() {
		_, _, _ = s.kubectl(t, "", "delete", "storageversionmigration", "e2e-"+ns, "--ignore-not-found")
	})
	out = s.must(t, "get", "storageversionmigrations", "e2e-"+ns)
	if !regexp.MustCompile(`(?m)^NAME\s+RESOURCE\s+STATUS$`).MatchString(out) || !regexp.MustCompile(`(?m)^e2e-`+ns+`\s+deployments\.apps\s+Unknown$`).MatchString(out) {
		t.Fatalf("kubectl get storageversionmigrations:\n%s", out)
	}
	// view and edit carry upstream's rules for claims (the bootstrap roles).
	eventually(t, 30*time.Second, "view reads and edit writes resourceclaims", func() (bool, string) {
		view := s.must(t, "get", "clusterrole", "view", "-o", "jsonpath={.rules[?(@.apiGroups[0]==\"resource.k8s.io\")].resources}")
		edit := s.must(t, "get", "clusterrole", "edit", "-o", "jsonpath={.rules[?(@.apiGroups[0]==\"resource.k8s.io\")].verbs}")
		return strings.Contains(view, "resourceclaimtemplates") && strings.Contains(edit, "create"), view + " " + edit
	})
}

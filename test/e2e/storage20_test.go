package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestVolumeAttributesClasses: storage.k8s.io/v1 VolumeAttributesClass goes through the
// lifecycle the conformance spec walks (create, get, strategic patch of labels, delete,
// update, list and delete by label selector); its driver name and parameters are
// immutable with kube-apiserver's messages; kubectl knows the short name "vac" and
// prints NAME DRIVERNAME AGE.
func TestVolumeAttributesClasses(t *testing.T) {
	c := up(t)
	s := c.srv
	ctx := context.Background()
	ns := s.namespace(t)
	api := s.client(t).StorageV1().VolumeAttributesClasses()
	sel := metav1.ListOptions{LabelSelector: "e2e-vac=" + ns}
	t.Cleanup(func() { _ = api.DeleteCollection(context.Background(), metav1.DeleteOptions{}, sel) })

	vac, err := api.Create(ctx, &storagev1.VolumeAttributesClass{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-", Labels: map[string]string{"e2e-vac": ns}},
		DriverName: "e2e-fake-csi-driver", Parameters: map[string]string{"foo": "bar"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patched, err := api.Patch(ctx, vac.Name, types.StrategicMergePatchType, []byte(`{"metadata":{"labels":{"`+vac.Name+`":"patched"}}}`), metav1.PatchOptions{})
	if err != nil || patched.Labels[vac.Name] != "patched" {
		t.Fatalf("strategic patch of labels: %v", err)
	}
	out := s.must(t, "get", "vac", "-l", "e2e-vac="+ns)
	if !regexp.MustCompile(`(?m)^NAME\s+DRIVERNAME\s+AGE$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(vac.Name)+`\s+e2e-fake-csi-driver\s+\S+$`).MatchString(out) {
		t.Fatalf("kubectl get vac:\n%s", out)
	}
	_, errOut, err := s.kubectl(t, "", "patch", "vac", vac.Name, "--type=merge", "-p", `{"driverName":"other","parameters":{"foo":"baz"}}`)
	if err == nil || !strings.Contains(errOut, "driverName: Forbidden: updates to driverName are forbidden.") ||
		!strings.Contains(errOut, "parameters: Forbidden: updates to parameters are forbidden.") {
		t.Fatalf("patch of driverName and parameters: err %v, stderr %s", err, errOut)
	}
	if _, err := api.Create(ctx, &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: ns + "-empty"}, DriverName: "d"}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "parameters: Required value: must contain at least one key/value pair") {
		t.Fatalf("create without parameters: %v, want Invalid naming parameters", err)
	}
	if err := api.Delete(ctx, vac.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Get(ctx, vac.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get after delete: %v, want NotFound", err)
	}
	repl, err := api.Create(ctx, &storagev1.VolumeAttributesClass{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-v2-", Labels: map[string]string{"e2e-vac": ns}},
		DriverName: "e2e-fake-csi-driver", Parameters: map[string]string{"foo": "bar"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	repl.Labels["updated"] = "yes"
	if _, err := api.Update(ctx, repl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := api.List(ctx, metav1.ListOptions{LabelSelector: "updated=yes,e2e-vac=" + ns})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list by label: %v, %d items, want 1", err, len(list.Items))
	}
	if err := api.DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
		t.Fatal(err)
	}
	if list, err := api.List(ctx, sel); err != nil || len(list.Items) != 0 {
		t.Fatalf("list after deletecollection: %v, %d items", err, len(list.Items))
	}
}

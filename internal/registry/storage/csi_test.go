package storage

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func makeCSIDriver(mutate func(*storagev1.CSIDriver)) *storagev1.CSIDriver {
	d := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "hostpath.csi.k8s.io", CreationTimestamp: metav1.NewTime(created)}}
	DefaultCSIDriver(d)
	if mutate != nil {
		mutate(d)
	}
	return d
}

func TestCSIDriverDefaultsAndValidation(t *testing.T) {
	d := makeCSIDriver(nil)
	if !*d.Spec.AttachRequired || *d.Spec.PodInfoOnMount || *d.Spec.StorageCapacity || *d.Spec.RequiresRepublish ||
		*d.Spec.SELinuxMount || *d.Spec.PreventPodSchedulingIfMissing ||
		*d.Spec.FSGroupPolicy != storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy ||
		!cmp.Equal(d.Spec.VolumeLifecycleModes, []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}) {
		t.Errorf("defaults: %+v", d.Spec)
	}
	r := CSIDriverResource()
	tests := []struct {
		name   string
		mutate func(*storagev1.CSIDriver)
		want   []string
	}{
		{name: "defaulted"},
		{name: "unknown mode and policy", mutate: func(d *storagev1.CSIDriver) {
			d.Spec.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{"Sometimes"}
			d.Spec.FSGroupPolicy = new(storagev1.FSGroupPolicy("Always"))
		}, want: []string{
			`spec.fsGroupPolicy: Unsupported value: "Always": supported values: "File", "None", "ReadWriteOnceWithFSType"`,
			`spec.volumeLifecycleModes: Unsupported value: "Sometimes": supported values: "Persistent", "Ephemeral"`,
		}},
		{name: "token requests", mutate: func(d *storagev1.CSIDriver) {
			d.Spec.TokenRequests = []storagev1.TokenRequest{{Audience: "a", ExpirationSeconds: new(int64(60))}, {Audience: "a"}}
		}, want: []string{
			"spec.tokenRequests[0].expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes",
			`spec.tokenRequests[1].audience: Duplicate value: "a"`,
		}},
		{name: "token secrets without requests", mutate: func(d *storagev1.CSIDriver) { d.Spec.ServiceAccountTokenInSecrets = new(true) },
			want: []string{"spec.serviceAccountTokenInSecrets: Invalid value: true: serviceAccountTokenInSecrets is set but no tokenRequests are specified"}},
		{name: "short update period", mutate: func(d *storagev1.CSIDriver) { d.Spec.NodeAllocatableUpdatePeriodSeconds = new(int64(5)) },
			want: []string{"spec.nodeAllocatableUpdatePeriodSeconds: Invalid value: 5: must be greater than or equal to 10 seconds"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, errStrings(r.Validate(makeCSIDriver(tc.mutate)))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	got := errStrings(r.ValidateUpdate(makeCSIDriver(func(d *storagev1.CSIDriver) {
		d.Spec.AttachRequired = new(false)
		d.Spec.VolumeLifecycleModes = append(d.Spec.VolumeLifecycleModes, storagev1.VolumeLifecycleEphemeral)
		d.Spec.PodInfoOnMount = new(true)
	}), makeCSIDriver(nil)))
	want := []string{"spec.attachedRequired: Invalid value: false: field is immutable",
		`spec.volumeLifecycleModes: Invalid value: ["Persistent","Ephemeral"]: field is immutable`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("update (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]interface{}{"hostpath.csi.k8s.io", true, false, false, "<unset>", false, "Persistent", "5m"},
		r.Row(makeCSIDriver(nil), created.Add(5*time.Minute))); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
	if !r.TrackGeneration || r.Namespaced || len(r.Columns) != 8 {
		t.Error("CSIDriver: cluster-scoped, generation tracked, 8 columns")
	}
}

func TestCSINode(t *testing.T) {
	r := CSINodeResource()
	node := func(drivers ...storagev1.CSINodeDriver) *storagev1.CSINode {
		return &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "node-1", CreationTimestamp: metav1.NewTime(created)},
			Spec: storagev1.CSINodeSpec{Drivers: drivers}}
	}
	ok := storagev1.CSINodeDriver{Name: "hostpath.csi.k8s.io", NodeID: "node-1", TopologyKeys: []string{"topology.kubernetes.io/zone"},
		Allocatable: &storagev1.VolumeNodeResources{Count: new(int32(10))}}
	if errs := r.Validate(node()); len(errs) != 0 {
		t.Errorf("empty CSINode: %v", errs)
	}
	if errs := r.Validate(node(ok)); len(errs) != 0 {
		t.Errorf("valid driver: %v", errs)
	}
	bad := ok
	bad.NodeID = ""
	bad.Allocatable = &storagev1.VolumeNodeResources{Count: new(int32(-1))}
	bad.TopologyKeys = []string{"zone", "zone"}
	want := []string{
		"spec.drivers[1].nodeID: Required value",
		"spec.drivers[1].allocatable.count: Invalid value: -1: must be greater than or equal to 0",
		`spec.drivers[1].name: Duplicate value: "hostpath.csi.k8s.io"`,
		`spec.drivers[1]: Duplicate value: "zone"`,
	}
	if diff := cmp.Diff(want, errStrings(r.Validate(node(ok, bad)))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	moreVolumes := ok
	moreVolumes.Allocatable = &storagev1.VolumeNodeResources{Count: new(int32(20))}
	if errs := r.ValidateUpdate(node(moreVolumes), node(ok)); len(errs) != 0 {
		t.Errorf("allocatable count change refused: %v", errs)
	}
	otherID := ok
	otherID.NodeID = "node-2"
	if got := errStrings(r.ValidateUpdate(node(otherID), node(ok))); len(got) != 1 || !strings.Contains(got[0], "field is immutable") {
		t.Errorf("nodeID change: %q", got)
	}
	if diff := cmp.Diff([]interface{}{"node-1", int64(1), "5m"}, r.Row(node(ok), created.Add(5*time.Minute))); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
}

func TestCSIStorageCapacity(t *testing.T) {
	r := CSIStorageCapacityResource()
	csc := func(mutate func(*storagev1.CSIStorageCapacity)) *storagev1.CSIStorageCapacity {
		c := &storagev1.CSIStorageCapacity{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "csc-1"},
			StorageClassName: "standard", Capacity: new(resource.MustParse("10Gi")),
			NodeTopology: &metav1.LabelSelector{MatchLabels: map[string]string{"topology.kubernetes.io/zone": "a"}}}
		if mutate != nil {
			mutate(c)
		}
		return c
	}
	if errs := r.Validate(csc(nil)); len(errs) != 0 {
		t.Errorf("valid: %v", errs)
	}
	want := []string{`storageClassName: Invalid value: "Standard": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		`capacity: Invalid value: "-1": must be greater than or equal to 0`}
	if diff := cmp.Diff(want, errStrings(r.Validate(csc(func(c *storagev1.CSIStorageCapacity) {
		c.StorageClassName = "Standard"
		c.Capacity = new(resource.MustParse("-1"))
	})))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	got := errStrings(r.ValidateUpdate(csc(func(c *storagev1.CSIStorageCapacity) {
		c.StorageClassName = "fast"
		c.NodeTopology = nil
		c.Capacity = new(resource.MustParse("20Gi"))
	}), csc(nil)))
	want = []string{"nodeTopology: Invalid value: null: field is immutable", `storageClassName: Invalid value: "fast": field is immutable`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("update (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]interface{}{"csc-1", "standard", "10Gi"}, r.Row(csc(nil), created)); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
	if !r.Namespaced {
		t.Error("CSIStorageCapacity is namespaced")
	}
}

func TestVolumeAttachment(t *testing.T) {
	r := VolumeAttachmentResource()
	va := func(mutate func(*storagev1.VolumeAttachment)) *storagev1.VolumeAttachment {
		v := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "va-1", CreationTimestamp: metav1.NewTime(created)},
			Spec: storagev1.VolumeAttachmentSpec{Attacher: "e2e-test.storage.k8s.io", NodeName: "node-1",
				Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: new("pv-1")}}}
		if mutate != nil {
			mutate(v)
		}
		return v
	}
	tests := []struct {
		name   string
		mutate func(*storagev1.VolumeAttachment)
		want   []string
	}{
		{name: "persistent volume"},
		{name: "inline CSI", mutate: func(v *storagev1.VolumeAttachment) {
			v.Spec.Source = storagev1.VolumeAttachmentSource{InlineVolumeSpec: &corev1.PersistentVolumeSpec{
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "a.b", VolumeHandle: "h"}}}}
		}},
		{name: "inline with capacity", mutate: func(v *storagev1.VolumeAttachment) {
			v.Spec.Source = storagev1.VolumeAttachmentSource{InlineVolumeSpec: &corev1.PersistentVolumeSpec{
				Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}
		}, want: []string{"spec.source.inlineVolumeSpec.capacity: Forbidden: may not be specified in the context of inline volumes",
			"spec.source.inlineVolumeSpec.csi: Required value: has to be specified in the context of inline volumes"}},
		{name: "no source, attacher or node", mutate: func(v *storagev1.VolumeAttachment) {
			v.Spec = storagev1.VolumeAttachmentSpec{}
		}, want: []string{"spec.attacher: Required value",
			"spec.source: Required value: must specify exactly one of inlineVolumeSpec and persistentVolumeName",
			`spec.nodeName: Invalid value: "": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`}},
		{name: "negative error code", mutate: func(v *storagev1.VolumeAttachment) {
			v.Status.AttachError = &storagev1.VolumeError{ErrorCode: new(int32(-1))}
		}, want: []string{"status.attachError.errorCode: Invalid value: -1: must be between 0 and 2147483647, inclusive"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, errStrings(r.Validate(va(tc.mutate)))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	withStatus := va(func(v *storagev1.VolumeAttachment) { v.Status.Attached = true })
	r.PrepareForCreate(withStatus)
	if withStatus.Status.Attached {
		t.Error("status kept on create")
	}
	if got := errStrings(r.ValidateUpdate(va(func(v *storagev1.VolumeAttachment) { v.Spec.NodeName = "node-2" }), va(nil))); len(got) != 1 ||
		!strings.HasPrefix(got[0], "spec: Invalid value: ") || !strings.HasSuffix(got[0], "field is immutable") {
		t.Errorf("spec change: %q", got)
	}
	if r.Status == nil || r.Namespaced {
		t.Error("VolumeAttachment: cluster-scoped with a status subresource")
	}
	if diff := cmp.Diff([]interface{}{"va-1", "e2e-test.storage.k8s.io", "pv-1", "node-1", false, "5m"}, r.Row(va(nil), created.Add(5*time.Minute))); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
}

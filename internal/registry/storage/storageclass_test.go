package storage

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var created = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// makeClass returns a defaulted, valid StorageClass, changed by mutate.
func makeClass(mutate func(*storagev1.StorageClass)) *storagev1.StorageClass {
	c := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: "standard", CreationTimestamp: metav1.NewTime(created)},
		Provisioner:       "tranche.dev/hostpath",
		Parameters:        map[string]string{"root": "/var/lib/tranche/volumes"},
		ReclaimPolicy:     new(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: new(storagev1.VolumeBindingImmediate),
	}
	if mutate != nil {
		mutate(c)
	}
	return c
}

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func TestValidateStorageClass(t *testing.T) {
	topology := func(key string, values ...string) corev1.TopologySelectorTerm {
		return corev1.TopologySelectorTerm{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: key, Values: values}}}
	}
	tests := []struct {
		name   string
		mutate func(*storagev1.StorageClass)
		want   []string
	}{
		{name: "valid"},
		{name: "upper-case provisioner", mutate: func(c *storagev1.StorageClass) { c.Provisioner = "Tranche.dev/HostPath" }},
		{name: "provisioner required", mutate: func(c *storagev1.StorageClass) { c.Provisioner = "" },
			want: []string{"provisioner: Required value"}},
		{name: "provisioner not qualified", mutate: func(c *storagev1.StorageClass) { c.Provisioner = "a/b/c" },
			want: []string{`provisioner: Invalid value: "a/b/c": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`}},
		{name: "empty parameter key", mutate: func(c *storagev1.StorageClass) { c.Parameters = map[string]string{"": "x"} },
			want: []string{`parameters: Invalid value: "": field can not be empty.`}},
		{name: "reclaim policy unsupported", mutate: func(c *storagev1.StorageClass) { c.ReclaimPolicy = new(corev1.PersistentVolumeReclaimRecycle) },
			want: []string{`reclaimPolicy: Unsupported value: "Recycle": supported values: "Delete", "Retain"`}},
		{name: "binding mode required", mutate: func(c *storagev1.StorageClass) { c.VolumeBindingMode = nil },
			want: []string{"volumeBindingMode: Required value"}},
		{name: "binding mode unsupported", mutate: func(c *storagev1.StorageClass) { c.VolumeBindingMode = new(storagev1.VolumeBindingMode("Later")) },
			want: []string{`volumeBindingMode: Unsupported value: "Later": supported values: "Immediate", "WaitForFirstConsumer"`}},
		{name: "allowed topologies", mutate: func(c *storagev1.StorageClass) {
			c.AllowedTopologies = []corev1.TopologySelectorTerm{topology("topology.kubernetes.io/zone", "a", "b")}
		}},
		{name: "topology without values", mutate: func(c *storagev1.StorageClass) {
			c.AllowedTopologies = []corev1.TopologySelectorTerm{topology("topology.kubernetes.io/zone")}
		}, want: []string{"allowedTopologies[0].matchLabelExpressions[0].values: Required value"}},
		{name: "duplicate topology value", mutate: func(c *storagev1.StorageClass) {
			c.AllowedTopologies = []corev1.TopologySelectorTerm{topology("zone", "a", "a")}
		}, want: []string{`allowedTopologies[0].matchLabelExpressions[0].values[1]: Duplicate value: "a"`}},
		{name: "duplicate topology term", mutate: func(c *storagev1.StorageClass) {
			c.AllowedTopologies = []corev1.TopologySelectorTerm{topology("zone", "a"), topology("zone", "a")}
		}, want: []string{`allowedTopologies[1].matchLabelExpressions: Duplicate value: ""`}},
	}
	r := StorageClassResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := errStrings(r.Validate(makeClass(tc.mutate)))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateStorageClassUpdate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*storagev1.StorageClass)
		want   []string
	}{
		{name: "unchanged"},
		{name: "expansion may change", mutate: func(c *storagev1.StorageClass) { c.AllowVolumeExpansion = new(true) }},
		{name: "parameters", mutate: func(c *storagev1.StorageClass) { c.Parameters["root"] = "/srv" },
			want: []string{"parameters: Forbidden: updates to parameters are forbidden."}},
		{name: "provisioner", mutate: func(c *storagev1.StorageClass) { c.Provisioner = "example.com/nfs" },
			want: []string{"provisioner: Forbidden: updates to provisioner are forbidden."}},
		{name: "reclaim policy", mutate: func(c *storagev1.StorageClass) { c.ReclaimPolicy = new(corev1.PersistentVolumeReclaimRetain) },
			want: []string{"reclaimPolicy: Forbidden: updates to reclaimPolicy are forbidden."}},
		{name: "binding mode", mutate: func(c *storagev1.StorageClass) {
			c.VolumeBindingMode = new(storagev1.VolumeBindingWaitForFirstConsumer)
		}, want: []string{`volumeBindingMode: Invalid value: "WaitForFirstConsumer": field is immutable`}},
	}
	r := StorageClassResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := errStrings(r.ValidateUpdate(makeClass(tc.mutate), makeClass(nil)))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefaultStorageClass(t *testing.T) {
	c := makeClass(func(c *storagev1.StorageClass) { c.ReclaimPolicy, c.VolumeBindingMode = nil, nil })
	StorageClassResource().Default(c)
	if diff := cmp.Diff(makeClass(nil), c); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	kept := makeClass(func(c *storagev1.StorageClass) { c.ReclaimPolicy = new(corev1.PersistentVolumeReclaimRetain) })
	StorageClassResource().Default(kept)
	if *kept.ReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
		t.Errorf("default overwrote reclaimPolicy: %v", *kept.ReclaimPolicy)
	}
}

func TestStorageClassRow(t *testing.T) {
	now := created.Add(50 * time.Hour)
	tests := []struct {
		name   string
		mutate func(*storagev1.StorageClass)
		want   []interface{}
	}{
		{name: "plain", want: []interface{}{"standard", "tranche.dev/hostpath", "Delete", "Immediate", false, "2d2h"}},
		{name: "default class", mutate: func(c *storagev1.StorageClass) {
			c.Annotations = map[string]string{AnnotationIsDefault: "true"}
			c.ReclaimPolicy = new(corev1.PersistentVolumeReclaimRetain)
			c.VolumeBindingMode = new(storagev1.VolumeBindingWaitForFirstConsumer)
			c.AllowVolumeExpansion = new(true)
		}, want: []interface{}{"standard (default)", "tranche.dev/hostpath", "Retain", "WaitForFirstConsumer", true, "2d2h"}},
		{name: "beta default annotation", mutate: func(c *storagev1.StorageClass) {
			c.Annotations = map[string]string{AnnotationBetaIsDefault: "true"}
		}, want: []interface{}{"standard (default)", "tranche.dev/hostpath", "Delete", "Immediate", false, "2d2h"}},
		{name: "annotation false", mutate: func(c *storagev1.StorageClass) {
			c.Annotations = map[string]string{AnnotationIsDefault: "false"}
		}, want: []interface{}{"standard", "tranche.dev/hostpath", "Delete", "Immediate", false, "2d2h"}},
		{name: "unset policy and mode", mutate: func(c *storagev1.StorageClass) { c.ReclaimPolicy, c.VolumeBindingMode = nil, nil },
			want: []interface{}{"standard", "tranche.dev/hostpath", "Delete", "Immediate", false, "2d2h"}},
	}
	r := StorageClassResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := r.Row(makeClass(tc.mutate), now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
			if len(got) != len(r.Columns) {
				t.Errorf("row has %d cells for %d columns", len(got), len(r.Columns))
			}
		})
	}
	var nilClass *storagev1.StorageClass
	r.Default(nilClass)
	if r.Row(nilClass, now) != nil || r.Validate(nilClass) != nil || r.ValidateUpdate(nilClass, nilClass) != nil {
		t.Errorf("nil class produced output")
	}
}

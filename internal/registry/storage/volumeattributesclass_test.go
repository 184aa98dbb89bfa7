package storage

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func makeVAC(mutate func(*storagev1.VolumeAttributesClass)) *storagev1.VolumeAttributesClass {
	c := &storagev1.VolumeAttributesClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gold"},
		DriverName: "csi.example.com",
		Parameters: map[string]string{"iops": "3000"},
	}
	if mutate != nil {
		mutate(c)
	}
	return c
}

func TestValidateVolumeAttributesClass(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*storagev1.VolumeAttributesClass)
		want   []string
	}{
		{name: "valid"},
		{name: "upper-case driver name is compared in lower case", mutate: func(c *storagev1.VolumeAttributesClass) { c.DriverName = "CSI.Example.com" }},
		{name: "no driver", mutate: func(c *storagev1.VolumeAttributesClass) { c.DriverName = "" },
			want: []string{"driverName: Required value"}},
		{name: "bad driver", mutate: func(c *storagev1.VolumeAttributesClass) { c.DriverName = "a/b/c" },
			want: []string{`driverName: Invalid value: "a/b/c": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`}},
		{name: "no parameters", mutate: func(c *storagev1.VolumeAttributesClass) { c.Parameters = nil },
			want: []string{"parameters: Required value: must contain at least one key/value pair"}},
		{name: "empty key", mutate: func(c *storagev1.VolumeAttributesClass) { c.Parameters = map[string]string{"": "x"} },
			want: []string{`parameters: Invalid value: "": field can not be empty.`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := errStrings(ValidateVolumeAttributesClass(makeVAC(tc.mutate)))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateVolumeAttributesClassUpdate(t *testing.T) {
	old := makeVAC(nil)
	if errs := ValidateVolumeAttributesClassUpdate(makeVAC(func(c *storagev1.VolumeAttributesClass) { c.Labels = map[string]string{"a": "b"} }), old); len(errs) != 0 {
		t.Errorf("label change refused: %v", errs)
	}
	got := errStrings(ValidateVolumeAttributesClassUpdate(makeVAC(func(c *storagev1.VolumeAttributesClass) {
		c.DriverName = "other.example.com"
		c.Parameters = map[string]string{"iops": "6000"}
	}), old))
	want := []string{"driverName: Forbidden: updates to driverName are forbidden.", "parameters: Forbidden: updates to parameters are forbidden."}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

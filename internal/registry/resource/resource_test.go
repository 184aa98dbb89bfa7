package resource

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var created = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func TestResourceClaim(t *testing.T) {
	r := ResourceClaimResource()
	claim := func(reqs ...resourcev1.DeviceRequest) *resourcev1.ResourceClaim {
		c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", CreationTimestamp: metav1.NewTime(created)},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: reqs}}}
		r.Default(c)
		return c
	}
	exact := func(name, class string) resourcev1.DeviceRequest {
		return resourcev1.DeviceRequest{Name: name, Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class}}
	}
	ok := claim(exact("req-0", "dra.example.com"))
	if ok.Spec.Devices.Requests[0].Exactly.AllocationMode != resourcev1.DeviceAllocationModeExactCount || ok.Spec.Devices.Requests[0].Exactly.Count != 1 {
		t.Errorf("defaults: %+v", ok.Spec.Devices.Requests[0].Exactly)
	}
	if errs := r.Validate(ok); len(errs) != 0 {
		t.Errorf("conformance claim: %v", errs)
	}
	bad := claim(exact("Req", ""), resourcev1.DeviceRequest{Name: "b"}, exact("b", "x"))
	want := []string{
		`spec.devices.requests[0].name: Invalid value: "Req": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
		"spec.devices.requests[0].exactly.deviceClassName: Required value",
		"spec.devices.requests[1]: Required value: exactly one of `exactly` or `firstAvailable` is required",
		`spec.devices.requests[2].name: Duplicate value: "b"`,
	}
	if diff := cmp.Diff(want, errStrings(r.Validate(bad))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	changed := claim(exact("req-1", "dra.example.com"))
	if got := errStrings(r.ValidateUpdate(changed, ok)); len(got) != 1 {
		t.Errorf("spec change: %q", got)
	}
	if r.Status == nil {
		t.Error("ResourceClaim has a status subresource")
	}
	ok.Status.Allocation = &resourcev1.AllocationResult{}
	if diff := cmp.Diff([]interface{}{"c", "allocated", "5m"}, r.Row(ok, created.Add(5*time.Minute))); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
}

func TestResourceSlice(t *testing.T) {
	r := ResourceSliceResource()
	slice := func(mutate func(*resourcev1.ResourceSliceSpec)) *resourcev1.ResourceSlice {
		s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s", CreationTimestamp: metav1.NewTime(created)},
			Spec: resourcev1.ResourceSliceSpec{Driver: "dra.example.com", NodeName: new("no-such-node"),
				Pool: resourcev1.ResourcePool{Name: "cluster", Generation: 1, ResourceSliceCount: 1}}}
		if mutate != nil {
			mutate(&s.Spec)
		}
		return s
	}
	if errs := r.Validate(slice(nil)); len(errs) != 0 {
		t.Errorf("conformance slice: %v", errs)
	}
	want := []string{
		"spec.pool.resourceSliceCount: Invalid value: 0: must be greater than zero",
		"spec: Invalid value: null: exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required, but multiple fields are set",
		`spec.devices[1].name: Duplicate value: "d"`,
	}
	got := errStrings(r.Validate(slice(func(s *resourcev1.ResourceSliceSpec) {
		s.Pool.ResourceSliceCount = 0
		s.AllNodes = new(true)
		s.Devices = []resourcev1.Device{{Name: "d"}, {Name: "d"}}
	})))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := r.Fields(slice(nil)); got["spec.nodeName"] != "no-such-node" || got["spec.driver"] != "dra.example.com" {
		t.Errorf("fields %v", got)
	}
	if diff := cmp.Diff([]interface{}{"s", "no-such-node", "dra.example.com", "cluster", "5m"}, r.Row(slice(nil), created.Add(5*time.Minute))); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
}

func TestDeviceClassAndTaintRule(t *testing.T) {
	dc := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: "false"}}, {}}}}
	if diff := cmp.Diff([]string{"spec.selectors[1].cel: Required value"}, errStrings(DeviceClassResource().Validate(dc))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	r := DeviceTaintRuleResource()
	rule := &resourcev1.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: "t"},
		Spec: resourcev1.DeviceTaintRuleSpec{Taint: resourcev1.DeviceTaint{Key: "testing", Effect: resourcev1.DeviceTaintEffectNone}}}
	r.PrepareForCreate(rule)
	if rule.Spec.Taint.TimeAdded == nil {
		t.Error("timeAdded not set on create")
	}
	if errs := r.Validate(rule); len(errs) != 0 {
		t.Errorf("conformance rule: %v", errs)
	}
	rule.Spec.Taint.Effect = "Evict"
	if diff := cmp.Diff([]string{`spec.taint.effect: Unsupported value: "Evict": supported values: "NoExecute", "NoSchedule", "None"`}, errStrings(r.Validate(rule))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

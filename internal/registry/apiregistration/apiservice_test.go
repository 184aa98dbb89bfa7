package apiregistration

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

// makeAPIService returns a valid service-backed APIService v1beta1.wardle.example.com
// (its caBundle is 27 bytes),
// changed by mutate.
func makeAPIService(mutate func(*apiregv1.APIService)) *apiregv1.APIService {
	a := &apiregv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1beta1.wardle.example.com"},
		Spec: apiregv1.APIServiceSpec{
			Group: "wardle.example.com", Version: "v1beta1", GroupPriorityMinimum: 2000, VersionPriority: 200,
			Service:  &apiregv1.ServiceReference{Namespace: "ns", Name: "sample-api", Port: new(int32(443))},
			CABundle: []byte("-----BEGIN CERTIFICATE-----"),
		},
	}
	if mutate != nil {
		mutate(a)
	}
	return a
}

func TestValidateAPIService(t *testing.T) {
	r := APIServiceResource()
	tests := []struct {
		name   string
		mutate func(*apiregv1.APIService)
		want   string // a substring of the errors; "" = valid
	}{
		{name: "valid service-backed"},
		{name: "valid local", mutate: func(a *apiregv1.APIService) { a.Spec.Service, a.Spec.CABundle = nil, nil }},
		{name: "valid core", mutate: func(a *apiregv1.APIService) {
			a.Name, a.Spec.Group, a.Spec.Version, a.Spec.Service, a.Spec.CABundle = "v1.", "", "v1", nil, nil
		}},
		{name: "name is not version.group", mutate: func(a *apiregv1.APIService) { a.Name = "wardle" },
			want: `metadata.name: Invalid value: "wardle": must be ` + "`spec.version+\".\"+spec.group`" + `: "v1beta1.wardle.example.com"`},
		{name: "caBundle and insecureSkipTLSVerify", mutate: func(a *apiregv1.APIService) { a.Spec.InsecureSkipTLSVerify = true },
			want: "spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is present"},
		{name: "local with a caBundle", mutate: func(a *apiregv1.APIService) { a.Spec.Service = nil },
			want: `spec.caBundle: Invalid value: "27 bytes": local APIServices may not have a caBundle`},
		{name: "priority out of range", mutate: func(a *apiregv1.APIService) { a.Spec.GroupPriorityMinimum = 0 },
			want: "spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			a := makeAPIService(tc.mutate)
			for _, msg := range r.NameValidation(a.Name, false) {
				got = append(got, "name: "+msg)
			}
			for _, e := range r.Validate(a) {
				got = append(got, e.Error())
			}
			joined := strings.Join(got, "; ")
			if tc.want == "" && len(got) > 0 || tc.want != "" && !strings.Contains(joined, tc.want) {
				t.Errorf("errors %q, want %q", joined, tc.want)
			}
		})
	}
}

func TestAPIServiceCreateDropsStatus(t *testing.T) {
	a := makeAPIService(func(a *apiregv1.APIService) {
		a.Status.Conditions = []apiregv1.APIServiceCondition{{Type: apiregv1.Available, Status: apiregv1.ConditionTrue}}
	})
	APIServiceResource().PrepareForCreate(a)
	if len(a.Status.Conditions) != 0 {
		t.Errorf("status kept on create: %+v", a.Status)
	}
}

func TestAPIServiceRow(t *testing.T) {
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := APIServiceResource()
	tests := []struct {
		name   string
		mutate func(*apiregv1.APIService)
		want   []interface{}
	}{
		{name: "local and available", mutate: func(a *apiregv1.APIService) {
			a.Name, a.Spec.Service = "v1.apps", nil
			a.Status.Conditions = []apiregv1.APIServiceCondition{{Type: apiregv1.Available, Status: apiregv1.ConditionTrue, Reason: "Local"}}
		}, want: []interface{}{"v1.apps", "Local", "True", "2m"}},
		{name: "service without endpoints", mutate: func(a *apiregv1.APIService) {
			a.Status.Conditions = []apiregv1.APIServiceCondition{{Type: apiregv1.Available, Status: apiregv1.ConditionFalse, Reason: "MissingEndpoints"}}
		}, want: []interface{}{"v1beta1.wardle.example.com", "ns/sample-api", "False (MissingEndpoints)", "2m"}},
		{name: "no condition yet", want: []interface{}{"v1beta1.wardle.example.com", "ns/sample-api", "Unknown", "2m"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := makeAPIService(tc.mutate)
			a.CreationTimestamp = metav1.NewTime(created)
			if diff := cmp.Diff(tc.want, r.Row(a, created.Add(2*time.Minute))); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
		})
	}
}

package core

import (
	"encoding/json"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// FuzzValidateService feeds arbitrary JSON services through every Service hook in the
// order the handlers call them; none may panic, whatever the input.
func FuzzValidateService(f *testing.F) {
	for _, seed := range []string{
		`{"metadata":{"name":"web"},"spec":{"selector":{"app":"web"},"ports":[{"port":80,"targetPort":8080}]}}`,
		`{"spec":{"type":"NodePort","ports":[{"name":"a","port":80,"nodePort":30080},{"name":"b","port":81,"protocol":"UDP"}]}}`,
		`{"spec":{"type":"LoadBalancer","externalTrafficPolicy":"Local","healthCheckNodePort":30100,"ports":[{"port":443}]},"status":{"loadBalancer":{"ingress":[{"ip":"127.0.10.1"},{"hostname":"lb.example.com","ipMode":"Proxy"}]}}}`,
		`{"spec":{"type":"ExternalName","externalName":"db.example.com.","clusterIP":"None"}}`,
		`{"spec":{"clusterIP":"None","clusterIPs":["None","10.0.0.1"],"ipFamilies":["IPv6","IPv6","IPv5"],"ipFamilyPolicy":"Whatever"}}`,
		`{"spec":{"sessionAffinity":"ClientIP","sessionAffinityConfig":{"clientIP":{}},"ports":[{"port":0,"targetPort":"x_"}]}}`,
		`{"spec":{"clusterIP":"10.96.0.1","clusterIPs":["10.96.0.1","fd00::1","10.96.0.2"],"externalIPs":["0.0.0.0","::1","bogus"],"loadBalancerSourceRanges":["nope"],"trafficDistribution":"PreferClose"}}`,
		`{"spec":{"ports":[{"port":80},{"port":80}],"internalTrafficPolicy":"Sideways","allocateLoadBalancerNodePorts":false,"loadBalancerClass":"x"}}`,
		`{}`,
	} {
		f.Add([]byte(seed), []byte(`{"spec":{"type":"NodePort","clusterIP":"10.96.0.9","ports":[{"port":80,"nodePort":30001}]}}`))
	}
	r := ServiceResource()
	f.Fuzz(func(t *testing.T, data, oldData []byte) {
		svc := &v1.Service{}
		if json.Unmarshal(data, svc) != nil {
			return
		}
		old := &v1.Service{}
		if json.Unmarshal(oldData, old) != nil {
			return
		}
		r.PrepareForCreate(svc.DeepCopy())
		r.Default(old)
		created := svc.DeepCopy()
		r.PrepareForCreate(created)
		r.Default(created)
		r.Validate(created)
		r.Warnings(created, nil)
		r.Row(created, svcTestNow)
		r.Fields(created)

		updated := svc.DeepCopy()
		r.PrepareForUpdate(updated, old)
		r.Default(updated)
		r.ValidateUpdate(updated, old)
		r.Warnings(updated, old)
		r.Status.PrepareForUpdate(updated, old)
		r.Status.ValidateUpdate(updated, old)
		r.Row(updated, svcTestNow)

		// Hooks also run on undefaulted input, and against a defaulted copy of itself.
		raw := svc.DeepCopy()
		r.Validate(raw)
		r.ValidateUpdate(raw, created)
		r.ValidateUpdate(created, raw)
		r.PrepareForUpdate(raw, created)
		r.Row(raw, svcTestNow)
	})
}

func TestServiceHooksTolerateNilAndForeignObjects(t *testing.T) {
	r := ServiceResource()
	var nilSvc *v1.Service
	for _, obj := range []runtime.Object{nilSvc, &v1.Pod{}} {
		r.PrepareForCreate(obj)
		r.PrepareForUpdate(obj, obj)
		r.Default(obj)
		r.Validate(obj)
		r.ValidateUpdate(obj, obj)
		r.Warnings(obj, nil)
		r.Status.PrepareForUpdate(obj, obj)
		r.Status.ValidateUpdate(obj, obj)
		r.Row(obj, svcTestNow)
		r.Fields(obj)
	}
}

package discovery

import (
	"encoding/json"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// FuzzValidateEndpointSlice decodes arbitrary JSON into a slice and runs every hook the API
// handlers run on user input; none may panic.
func FuzzValidateEndpointSlice(f *testing.F) {
	seeds := []string{
		`{}`,
		`{"addressType":"IPv4","endpoints":[{"addresses":["10.244.1.2"],"conditions":{"ready":true}}],"ports":[{"name":"http","port":80,"protocol":"TCP"}]}`,
		`{"addressType":"IPv6","endpoints":[{"addresses":["fd00::1","fe80::1"],"hostname":"a","nodeName":"n1","zone":"z","hints":{"forZones":[{"name":"z"},{"name":"z"}],"forNodes":[{"name":"n1"}]}}],"ports":[{}]}`,
		`{"addressType":"FQDN","endpoints":[{"addresses":[]},{"addresses":["x"],"deprecatedTopology":{"a":"b"}}],"ports":[{"port":null},{"name":"","appProtocol":"h2c"}]}`,
		`{"addressType":"IP","endpoints":[{}],"ports":[{"port":-1,"protocol":"ICMP"}]}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	r := EndpointSliceResource()
	f.Fuzz(func(t *testing.T, data []byte) {
		var s, old discoveryv1.EndpointSlice
		if err := json.Unmarshal(data, &s); err != nil {
			return
		}
		_ = json.Unmarshal(data, &old)
		r.Validate(&s)
		r.ValidateUpdate(&s, &old)
		r.Row(&s, created)
		r.PrepareForCreate(&s)
		r.PrepareForUpdate(&s, &old)
		r.Default(&s)
		r.Validate(&s)
		r.Row(&s, created)
	})
}

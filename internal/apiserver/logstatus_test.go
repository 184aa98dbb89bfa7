package apiserver

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type fixedAnswer struct {
	code int
	body string
}

func (f fixedAnswer) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: f.code, Header: http.Header{"Content-Type": {"text/plain"}},
		Body: io.NopCloser(strings.NewReader(f.body)), Request: req}, nil
}

// TestNodeStatusTransport: an agent's plain-text error to pods/log becomes the Status
// kube-apiserver makes of a kubelet's (GenericHttpResponseChecker), and other
// subresources and successful answers pass as they are.
func TestNodeStatusTransport(t *testing.T) {
	tests := []struct {
		code     int
		body     string
		wantCode int32
		reason   metav1.StatusReason
		message  string
	}{
		{400, "container \"glibc-querier\": open /x: no such file or directory\n", 400, metav1.StatusReasonBadRequest,
			"container \"glibc-querier\": open /x: no such file or directory"},
		{500, "disk on fire", 500, metav1.StatusReasonInternalError, "Internal error occurred: disk on fire"},
		{404, "no such pod", 404, metav1.StatusReasonNotFound, "the server could not find the requested resource ( pods dns-test)"},
	}
	for _, tc := range tests {
		req, _ := http.NewRequest("GET", "https://node:10250/containerLogs/ns/dns-test/uid/c", nil)
		resp, err := nodeTransport(fixedAnswer{tc.code, tc.body}, "log", "dns-test").RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		var st metav1.Status
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatalf("%d: body is not a Status: %v", tc.code, err)
		}
		if resp.StatusCode != int(tc.wantCode) || st.Kind != "Status" || st.Code != tc.wantCode || st.Reason != tc.reason || st.Message != tc.message {
			t.Errorf("%d: HTTP %d, Status %+v; want %d %s %q", tc.code, resp.StatusCode, st, tc.wantCode, tc.reason, tc.message)
		}
	}
	for _, tc := range []struct {
		sub  string
		code int
	}{{"exec", 400}, {"log", 200}, {"log", 101}} {
		req, _ := http.NewRequest("GET", "https://node:10250/x", nil)
		resp, err := nodeTransport(fixedAnswer{tc.code, "as is"}, tc.sub, "p").RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := io.ReadAll(resp.Body); string(b) != "as is" {
			t.Errorf("%s %d: body %q, want it untouched", tc.sub, tc.code, b)
		}
	}
}

package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// maxNodeErrorBody is how much of a node's error answer becomes the Status message, as
// kube-apiserver's GenericHttpResponseChecker reads at most this much.
const maxNodeErrorBody = 4 << 10

// nodeTransport is the transport to a node agent for subresource sub of pod name:
// pods/log answers pass through nodeStatusTransport, the streams (exec, attach,
// port-forward) go as they are, as kube-apiserver checks only log responses.
func nodeTransport(rt http.RoundTripper, sub, name string) http.RoundTripper {
	if sub == "log" {
		return nodeStatusTransport{rt: rt, name: name}
	}
	return rt
}

// nodeStatusTransport turns a node agent's error answer to pods/log (a plain-text 4xx
// or 5xx, as kubelet's) into the Status kube-apiserver makes of it with its
// GenericHttpResponseChecker: 400 BadRequest and 500 InternalError with the agent's
// text as the message, other codes a generic server response naming the pod, so that
// clients see why (client-go otherwise reports "the server rejected our request for an
// unknown reason").
type nodeStatusTransport struct {
	rt   http.RoundTripper
	name string // the pod
}

func (t nodeStatusTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(req)
	// A websocket client of the log (binary.k8s.io) is switched by the agent itself:
	// its 101 passes, as do the successes kube-apiserver's checker lets through.
	if err != nil || resp.StatusCode == http.StatusSwitchingProtocols ||
		(resp.StatusCode >= http.StatusOK && resp.StatusCode <= http.StatusPartialContent) {
		return resp, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxNodeErrorBody))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	text := string(bytes.TrimRight(body, "\n"))
	var st *apierrors.StatusError
	switch resp.StatusCode {
	case http.StatusBadRequest:
		st = apierrors.NewBadRequest(text)
	case http.StatusInternalServerError:
		st = apierrors.NewInternalError(fmt.Errorf("%s", text))
	default:
		st = apierrors.NewGenericServerResponse(resp.StatusCode, "", schema.GroupResource{Resource: "pods"}, t.name, text, 0, false)
	}
	status := st.Status()
	status.APIVersion, status.Kind = "v1", "Status"
	out, err := json.Marshal(&status)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(out)))
	return &http.Response{
		Status: fmt.Sprintf("%d %s", status.Code, http.StatusText(int(status.Code))), StatusCode: int(status.Code),
		Proto: resp.Proto, ProtoMajor: resp.ProtoMajor, ProtoMinor: resp.ProtoMinor,
		Header: h, Body: io.NopCloser(bytes.NewReader(out)), ContentLength: int64(len(out)), Request: req,
	}, nil
}

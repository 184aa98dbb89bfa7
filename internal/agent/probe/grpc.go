package probe

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// gRPC status codes the probe tells apart.
const (
	grpcOK               = 0
	grpcDeadlineExceeded = 4
	grpcUnimplemented    = 12
)

// grpcServingStatus names grpc.health.v1.HealthCheckResponse.ServingStatus values.
var grpcServingStatus = map[uint64]string{0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}

// grpc runs a grpc.health.v1.Health/Check call over cleartext HTTP/2, as kubelet's gRPC
// probe does (no TLS). The two protobuf messages involved have one field each, so they
// are encoded by hand rather than pulling a gRPC stack into the agent.
func (pr *Prober) grpc(ctx context.Context, host string, port int, service string, timeout time.Duration) (Result, string) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addr := net.JoinHostPort(host, strconv.Itoa(port))

	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	transport := &http.Transport{
		Protocols:         &protocols,
		DisableKeepAlives: true,
		DialContext: func(_ context.Context, network, a string) (net.Conn, error) {
			return pr.dial(network, a, timeout)
		},
	}
	defer transport.CloseIdleConnections()

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, (&url.URL{Scheme: "http", Host: addr, Path: "/grpc.health.v1.Health/Check"}).String(), bytes.NewReader(grpcFrame(healthCheckRequest(service))))
	if err != nil {
		return Unknown, fmt.Sprintf("error: health rpc to %q: %v", addr, err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set("Grpc-Timeout", strconv.FormatInt(timeout.Milliseconds(), 10)+"m")

	res, err := transport.RoundTrip(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return Failure, fmt.Sprintf("timeout: failed to connect service %q within %v: %+v", addr, timeout, err)
		}
		return Failure, fmt.Sprintf("error: failed to connect service at %q: %+v", addr, err)
	}
	defer func() { _ = res.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxBodyLength))
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return Failure, fmt.Sprintf("timeout: health rpc did not complete within %v", timeout)
		}
		return Failure, fmt.Sprintf("error: health rpc probe failed: %+v", err)
	}
	if res.StatusCode != http.StatusOK {
		return Failure, fmt.Sprintf("error: health rpc probe failed: rpc error: HTTP status %d", res.StatusCode)
	}
	// A call that fails before any message puts grpc-status in the headers
	// ("trailers-only"); otherwise it comes in the trailers.
	code, msg := res.Trailer.Get("Grpc-Status"), res.Trailer.Get("Grpc-Message")
	if code == "" {
		code, msg = res.Header.Get("Grpc-Status"), res.Header.Get("Grpc-Message")
	}
	if m, err := url.PathUnescape(msg); err == nil {
		msg = m
	}
	switch n, _ := strconv.Atoi(code); {
	case code == "":
		return Failure, "error: health rpc probe failed: rpc error: no grpc-status in the response"
	case n == grpcUnimplemented:
		return Failure, fmt.Sprintf("error: this server does not implement the grpc health protocol (grpc.health.v1.Health): %s", msg)
	case n == grpcDeadlineExceeded:
		return Failure, fmt.Sprintf("timeout: health rpc did not complete within %v", timeout)
	case n != grpcOK:
		return Failure, fmt.Sprintf("error: health rpc probe failed: rpc error: code = %s desc = %s", grpcCodeName(n), msg)
	}
	status, err := healthCheckStatus(body)
	if err != nil {
		return Failure, fmt.Sprintf("error: health rpc probe failed: %v", err)
	}
	if status != 1 {
		name, ok := grpcServingStatus[status]
		if !ok {
			name = strconv.FormatUint(status, 10)
		}
		return Failure, fmt.Sprintf("service unhealthy (responded with %q)", name)
	}
	return Success, "service healthy"
}

// grpcCodeName names a gRPC status code as grpc-go prints it.
func grpcCodeName(code int) string {
	names := []string{"OK", "Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound",
		"AlreadyExists", "PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted",
		"OutOfRange", "Unimplemented", "Internal", "Unavailable", "DataLoss", "Unauthenticated"}
	if code >= 0 && code < len(names) {
		return names[code]
	}
	return "Code(" + strconv.Itoa(code) + ")"
}

// healthCheckRequest encodes grpc.health.v1.HealthCheckRequest{service}: field 1, a
// length-delimited string, omitted when empty.
func healthCheckRequest(service string) []byte {
	if service == "" {
		return nil
	}
	b := []byte{0x0a}
	b = binary.AppendUvarint(b, uint64(len(service)))
	return append(b, service...)
}

// grpcFrame wraps a message in gRPC's length-prefixed framing (uncompressed).
func grpcFrame(msg []byte) []byte {
	b := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

// healthCheckStatus decodes the framed grpc.health.v1.HealthCheckResponse and returns its
// status (field 1, a varint; 0 when absent), skipping fields it does not know.
func healthCheckStatus(body []byte) (uint64, error) {
	if len(body) < 5 {
		return 0, fmt.Errorf("short gRPC response (%d bytes)", len(body))
	}
	if body[0] != 0 {
		return 0, fmt.Errorf("compressed gRPC response not supported")
	}
	n := binary.BigEndian.Uint32(body[1:5])
	msg := body[5:]
	if uint32(len(msg)) < n {
		return 0, fmt.Errorf("truncated gRPC response")
	}
	msg = msg[:n]
	var status uint64
	for len(msg) > 0 {
		key, k := binary.Uvarint(msg)
		if k <= 0 {
			return 0, fmt.Errorf("malformed HealthCheckResponse")
		}
		msg = msg[k:]
		switch key & 7 {
		case 0:
			v, k := binary.Uvarint(msg)
			if k <= 0 {
				return 0, fmt.Errorf("malformed HealthCheckResponse")
			}
			msg = msg[k:]
			if key>>3 == 1 {
				status = v
			}
		case 2:
			l, k := binary.Uvarint(msg)
			if k <= 0 || uint64(len(msg)-k) < l {
				return 0, fmt.Errorf("malformed HealthCheckResponse")
			}
			msg = msg[k+int(l):]
		case 1:
			if len(msg) < 8 {
				return 0, fmt.Errorf("malformed HealthCheckResponse")
			}
			msg = msg[8:]
		case 5:
			if len(msg) < 4 {
				return 0, fmt.Errorf("malformed HealthCheckResponse")
			}
			msg = msg[4:]
		default:
			return 0, fmt.Errorf("malformed HealthCheckResponse")
		}
	}
	return status, nil
}

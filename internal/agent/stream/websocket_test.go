package stream

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/net/websocket"

	"github.com/tranche/tranche/internal/agent/runtime"
)

// dialWS opens a WebSocket to path on ts with the given subprotocol, as the
// conformance specs do (golang.org/x/net/websocket).
func dialWS(t *testing.T, ts *httptest.Server, path, protocol string) *websocket.Conn {
	t.Helper()
	cfg, err := websocket.NewConfig("ws"+strings.TrimPrefix(ts.URL, "http")+path, "http://localhost")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Protocol = []string{protocol}
	ws, err := websocket.DialConfig(cfg)
	if err != nil {
		t.Fatalf("dialing %s with %q: %v", path, protocol, err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

// receiveAll reads messages until the server closes the connection.
func receiveAll(t *testing.T, ws *websocket.Conn) [][]byte {
	t.Helper()
	var msgs [][]byte
	for {
		var msg []byte
		if err := websocket.Message.Receive(ws, &msg); err != nil {
			if errors.Is(err, io.EOF) {
				return msgs
			}
			t.Fatalf("receiving: %v", err)
		}
		msgs = append(msgs, msg)
	}
}

// TestExecWebSocketProtocols: exec answers every protocol kubelet accepts: the
// channel.k8s.io of the conformance spec (binary, channel number first), its base64
// form (channel as a digit), and the v4 and v5 ones with the exit Status on channel 3.
func TestExecWebSocketProtocols(t *testing.T) {
	rt := &fakeRuntime{running: true, exec: func(ctx context.Context, argv []string, s runtime.Streams) (int, error) {
		fmt.Fprint(s.Stdout, strings.Join(argv[1:], " "))
		return 0, nil
	}}
	srv, _ := New(Config{Runtime: rt})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	path := "/exec/ns/pod/uid/c?command=echo&command=remote+execution+test&stdout=1&stderr=1"
	for _, protocol := range []string{"channel.k8s.io", "base64.channel.k8s.io", "v4.channel.k8s.io", "v4.base64.channel.k8s.io", "v5.channel.k8s.io"} {
		t.Run(protocol, func(t *testing.T) {
			var stdout, errCh bytes.Buffer
			msgs := receiveAll(t, dialWS(t, ts, path, protocol))
			// The empty message that says the session is established comes first,
			// except on v5 (see serveWebSocketCommand).
			if len(msgs) == 0 {
				t.Fatal("no messages")
			}
			announced := len(msgs[0]) == 1 && (msgs[0][0] == 1 || msgs[0][0] == '1')
			if v5 := strings.HasPrefix(protocol, "v5."); announced == v5 {
				t.Errorf("first message %q: want an empty stdout message on every protocol but v5", msgs[0])
			}
			for _, msg := range msgs {
				if len(msg) == 0 {
					continue
				}
				ch, data := msg[0], msg[1:]
				if strings.Contains(protocol, "base64") {
					ch -= '0'
					d, err := base64.StdEncoding.DecodeString(string(data))
					if err != nil {
						t.Fatalf("message %q: %v", msg, err)
					}
					data = d
				}
				switch ch {
				case 1:
					stdout.Write(data)
				case 3:
					errCh.Write(data)
				default:
					t.Fatalf("message on channel %d: %q", ch, data)
				}
			}
			if stdout.String() != "remote execution test" {
				t.Errorf("stdout %q", stdout.String())
			}
			if v45 := strings.HasPrefix(protocol, "v"); v45 != strings.Contains(errCh.String(), `"status":"Success"`) {
				t.Errorf("error channel %q: a v4 or v5 protocol reports a Status, an older one nothing on success", errCh.String())
			}
		})
	}
}

// TestLogsWebSocket: a log is served as WebSocket messages with the reader protocols
// kube-apiserver offers for pods/log (binary.k8s.io, base64.binary.k8s.io).
func TestLogsWebSocket(t *testing.T) {
	cur := filepath.Join(t.TempDir(), "0.log")
	writeLog(t, cur,
		"2026-01-01T10:00:00Z stdout F container is alive",
		"2026-01-01T10:00:01Z stdout F second",
	)
	srv, _ := New(Config{Runtime: &fakeRuntime{logs: map[string]string{"c": cur}}})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	for _, protocol := range []string{"binary.k8s.io", "base64.binary.k8s.io"} {
		t.Run(protocol, func(t *testing.T) {
			var got bytes.Buffer
			for _, msg := range receiveAll(t, dialWS(t, ts, "/containerLogs/ns/pod/uid/c", protocol)) {
				if strings.HasPrefix(protocol, "base64") {
					d, err := base64.StdEncoding.DecodeString(string(msg))
					if err != nil {
						t.Fatalf("message %q: %v", msg, err)
					}
					msg = d
				}
				got.Write(msg)
			}
			if want := "container is alive\nsecond\n"; got.String() != want {
				t.Errorf("log %q, want %q", got.String(), want)
			}
		})
	}
}

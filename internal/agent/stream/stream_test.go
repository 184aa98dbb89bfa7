package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/tranche/tranche/internal/agent/runtime"
)

// fakeRuntime answers the endpoint from memory: log paths from a map, exec through a
// function, and a record of the sessions it saw end.
type fakeRuntime struct {
	mu      sync.Mutex
	logs    map[string]string // "container" or "container/previous" -> path
	running bool
	exec    func(ctx context.Context, argv []string, s runtime.Streams) (int, error)
	ended   int
}

var _ Runtime = (*fakeRuntime)(nil)

func (f *fakeRuntime) LogPath(uid types.UID, c string, previous bool) (string, error) {
	key := c
	if previous {
		key += "/previous"
	}
	if p, ok := f.logs[key]; ok {
		return p, nil
	}
	return "", fmt.Errorf("previous terminated container %q in pod %s not found", c, uid)
}

func (f *fakeRuntime) ContainerRunning(types.UID, string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.running
}

func (f *fakeRuntime) setRunning(b bool) {
	f.mu.Lock()
	f.running = b
	f.mu.Unlock()
}

func (f *fakeRuntime) ExecStream(ctx context.Context, _ types.UID, _ string, argv []string, s runtime.Streams) (int, error) {
	defer func() {
		f.mu.Lock()
		f.ended++
		f.mu.Unlock()
	}()
	return f.exec(ctx, argv, s)
}

func (f *fakeRuntime) Attach(ctx context.Context, _ types.UID, _ string, s runtime.Streams) error {
	_, err := f.ExecStream(ctx, "", "", []string{"attach"}, s)
	return err
}

func (f *fakeRuntime) PodNetNS(types.UID) (string, bool) { return "pod-ns", true }

func (f *fakeRuntime) endedSessions() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ended
}

// writeLog writes CRI log lines.
func writeLog(t *testing.T, path string, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, l := range lines {
		if _, err := f.WriteString(l + "\n"); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLogs(t *testing.T) {
	dir := t.TempDir()
	cur, prev := filepath.Join(dir, "1.log"), filepath.Join(dir, "0.log")
	writeLog(t, cur,
		"2026-01-01T10:00:00.000000001Z stdout F one",
		"2026-01-01T10:00:01.000000000Z stderr P tw",
		"2026-01-01T10:00:01.500000000Z stderr F o",
		"2026-01-01T10:00:02.000000000Z stdout F three",
	)
	writeLog(t, prev, "2026-01-01T09:00:00Z stdout F before")
	rt := &fakeRuntime{logs: map[string]string{"c": cur, "c/previous": prev}}
	srv, err := New(Config{Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	cases := []struct {
		name, query string
		code        int
		want        string
	}{
		{"all", "", 200, "one\ntwo\nthree\n"},
		{"tail", "tailLines=2", 200, "two\nthree\n"},
		{"tail zero", "tailLines=0", 200, ""},
		{"tail more than there is", "tailLines=10", 200, "one\ntwo\nthree\n"},
		{"limit", "limitBytes=6", 200, "one\ntw"},
		{"timestamps", "timestamps=true&tailLines=1", 200, "2026-01-01T10:00:02Z three\n"},
		{"since time", "sinceTime=2026-01-01T10:00:01Z", 200, "two\nthree\n"},
		{"previous", "previous=true", 200, "before\n"},
		{"bad tail", "tailLines=-1", 400, "tailLines \"-1\": must be a non-negative integer\n"},
		{"bad since", "sinceTime=yesterday", 400, "sinceTime \"yesterday\": must be an RFC 3339 time\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Get(ts.URL + "/containerLogs/ns/pod/uid/c?" + tc.query)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.code || string(body) != tc.want {
				t.Fatalf("got %d %q, want %d %q", resp.StatusCode, body, tc.code, tc.want)
			}
		})
	}
	t.Run("no previous", func(t *testing.T) {
		resp, err := http.Get(ts.URL + "/containerLogs/ns/pod/uid/other?previous=1")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 400 || !strings.Contains(string(body), `previous terminated container "other"`) {
			t.Fatalf("got %d %q", resp.StatusCode, body)
		}
	})
}

// TestLogsFollow: a followed log shows lines written later, survives a rotation, and
// ends once the container stops running.
func TestLogsFollow(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	writeLog(t, path, "2026-01-01T10:00:00Z stdout F first")
	rt := &fakeRuntime{logs: map[string]string{"c": path}, running: true}
	srv, _ := New(Config{Runtime: rt})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	resp, err := http.Get(ts.URL + "/containerLogs/ns/pod/uid/c?follow=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var mu sync.Mutex
	var got bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1024)
		for {
			n, err := resp.Body.Read(buf)
			mu.Lock()
			got.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	waitOutput := func(want string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			mu.Lock()
			s := got.String()
			mu.Unlock()
			if s == want {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("followed output %q, want %q", got.String(), want)
	}
	waitOutput("first\n")
	writeLog(t, path, "2026-01-01T10:00:01Z stdout F second")
	waitOutput("first\nsecond\n")
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	writeLog(t, path, "2026-01-01T10:00:02Z stdout F third")
	waitOutput("first\nsecond\nthird\n")
	writeLog(t, path, "2026-01-01T10:00:03Z stdout F last")
	rt.setRunning(false)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("follow did not end after the container stopped")
	}
	waitOutput("first\nsecond\nthird\nlast\n")
}

// executors are the two ways kubectl runs a remote command.
func executors(t *testing.T, base string, query url.Values) map[string]remotecommand.Executor {
	t.Helper()
	u, _ := url.Parse(base)
	u.RawQuery = query.Encode()
	cfg := &rest.Config{Host: base}
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", u.String())
	if err != nil {
		t.Fatal(err)
	}
	sp, err := remotecommand.NewSPDYExecutor(cfg, "POST", u)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]remotecommand.Executor{"websocket": ws, "spdy": sp}
}

func TestExecStreamsAndExitCode(t *testing.T) {
	rt := &fakeRuntime{running: true, exec: func(ctx context.Context, argv []string, s runtime.Streams) (int, error) {
		in, _ := io.ReadAll(s.Stdin)
		fmt.Fprintf(s.Stdout, "%s:%s", strings.Join(argv, " "), bytes.ToUpper(in))
		fmt.Fprint(s.Stderr, "complaint")
		return 3, nil
	}}
	srv, _ := New(Config{Runtime: rt})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	q := url.Values{"command": {"tr", "a-z"}, "stdin": {"true"}, "stdout": {"true"}, "stderr": {"true"}}
	for name, ex := range executors(t, ts.URL+"/exec/ns/pod/uid/c", q) {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdin: strings.NewReader("hello"), Stdout: &out, Stderr: &errOut})
			var ce utilexec.CodeExitError
			if !errors.As(err, &ce) || ce.Code != 3 {
				t.Fatalf("error %v (%T), want exit code 3", err, err)
			}
			if out.String() != "tr a-z:HELLO" || errOut.String() != "complaint" {
				t.Fatalf("stdout %q, stderr %q", out.String(), errOut.String())
			}
		})
	}
}

type sizeQueue struct {
	sizes chan remotecommand.TerminalSize
}

func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	s, ok := <-q.sizes
	if !ok {
		return nil
	}
	return &s
}

func TestExecTerminalResize(t *testing.T) {
	rt := &fakeRuntime{running: true, exec: func(ctx context.Context, argv []string, s runtime.Streams) (int, error) {
		if !s.TTY || s.Stderr != nil {
			return 1, fmt.Errorf("tty %v, stderr %v", s.TTY, s.Stderr)
		}
		select {
		case sz := <-s.Resize:
			fmt.Fprintf(s.Stdout, "%dx%d", sz.Width, sz.Height)
			return 0, nil
		case <-time.After(5 * time.Second):
			return 1, errors.New("no terminal size came")
		}
	}}
	srv, _ := New(Config{Runtime: rt})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	q := url.Values{"command": {"sh"}, "stdout": {"true"}, "tty": {"true"}}
	for name, ex := range executors(t, ts.URL+"/exec/ns/pod/uid/c", q) {
		t.Run(name, func(t *testing.T) {
			sizes := &sizeQueue{sizes: make(chan remotecommand.TerminalSize, 1)}
			sizes.sizes <- remotecommand.TerminalSize{Width: 132, Height: 43}
			defer close(sizes.sizes)
			var out bytes.Buffer
			if err := ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdout: &out, Tty: true, TerminalSizeQueue: sizes}); err != nil {
				t.Fatal(err)
			}
			if out.String() != "132x43" {
				t.Fatalf("stdout %q, want 132x43", out.String())
			}
		})
	}
}

// TestDroppedClientEndsSession: when the client goes away mid-command, the command's
// context ends, and no goroutine of the session stays behind.
func TestDroppedClientEndsSession(t *testing.T) {
	started := make(chan struct{}, 1)
	rt := &fakeRuntime{running: true, exec: func(ctx context.Context, argv []string, s runtime.Streams) (int, error) {
		started <- struct{}{}
		<-ctx.Done()
		return -1, ctx.Err()
	}}
	srv, _ := New(Config{Runtime: rt})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	q := url.Values{"command": {"sleep", "1000"}, "stdout": {"true"}, "stderr": {"true"}}
	exs := executors(t, ts.URL+"/exec/ns/pod/uid/c", q)
	for i, name := range []string{"websocket", "spdy", "websocket", "spdy"} {
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			errc <- exs[name].StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard, Stderr: io.Discard})
		}()
		<-started
		cancel()
		<-errc
		deadline := time.Now().Add(5 * time.Second)
		for rt.endedSessions() != i+1 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if rt.endedSessions() != i+1 {
			t.Fatalf("%s session %d still runs after its client went", name, i)
		}
	}
	// Client-side goroutines of client-go may outlive a cancelled stream; what must
	// not stay is the endpoint's own.
	deadline := time.Now().Add(5 * time.Second)
	left, stacks := endpointGoroutines()
	for left > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		left, stacks = endpointGoroutines()
	}
	if left > 0 {
		t.Fatalf("%d endpoint goroutines after 4 dropped sessions:\n%s", left, stacks)
	}
}

// endpointGoroutines counts the goroutines running the endpoint's code (not this
// test's), and returns their stacks.
func endpointGoroutines() (int, string) {
	buf := make([]byte, 4<<20)
	all := string(buf[:goruntime.Stack(buf, true)])
	n := 0
	var out strings.Builder
	for _, g := range strings.Split(all, "\n\n") {
		if strings.Contains(g, "internal/agent/stream.(*") || strings.Contains(g, "internal/agent/stream.decodeSizes") {
			n++
			out.WriteString(g + "\n\n")
		}
	}
	return n, out.String()
}

func TestExecRefusals(t *testing.T) {
	rt := &fakeRuntime{running: false}
	srv, _ := New(Config{Runtime: rt})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	for _, tc := range []struct{ path, want string }{
		{"/exec/ns/pod/uid/c?command=true&stdout=1", `container not found ("c")`},
		{"/exec/ns/pod/uid/c?stdout=1", "you must specify at least one command for the container"},
		{"/exec/ns/pod/uid/c?command=true", "you must specify at least one of stdin, stdout, stderr"},
		{"/attach/ns/pod/uid/c?stdout=1", `container not found ("c")`},
	} {
		resp, err := http.Post(ts.URL+tc.path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s: %d %q, want 400 with %q", tc.path, resp.StatusCode, body, tc.want)
		}
	}
}

// TestPortForward: SPDY and SPDY-in-WebSocket both reach the pod's port, for several
// connections at once.
func TestPortForward(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	// goodbye answers and closes, as a server that ends the conversation does.
	goodbye, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer goodbye.Close()
	go func() {
		for {
			c, err := goodbye.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "bye")
			c.Close()
		}
	}()
	var dialedNS []string
	var mu sync.Mutex
	srv, _ := New(Config{Runtime: &fakeRuntime{running: true}, DialPod: func(ns string, port uint16) (net.Conn, error) {
		mu.Lock()
		dialedNS = append(dialedNS, fmt.Sprintf("%s:%d", ns, port))
		mu.Unlock()
		if port == 7070 {
			return net.Dial("tcp", goodbye.Addr().String())
		}
		return net.Dial("tcp", echo.Addr().String())
	}})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	u, _ := url.Parse(ts.URL + "/portForward/ns/pod/uid")
	cfg := &rest.Config{Host: ts.URL}
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tunnel, err := portforward.NewSPDYOverWebsocketDialer(u, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for name, dialer := range map[string]httpstream.Dialer{
		"spdy":      spdy.NewDialer(upgrader, &http.Client{Transport: transport}, "POST", u),
		"websocket": tunnel,
	} {
		t.Run(name, func(t *testing.T) {
			stop, ready := make(chan struct{}), make(chan struct{})
			pf, err := portforward.New(dialer, []string{"0:8080", "0:9090", "0:7070"}, stop, ready, io.Discard, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			errc := make(chan error, 1)
			go func() { errc <- pf.ForwardPorts() }()
			defer func() {
				close(stop)
				if err := <-errc; err != nil {
					t.Errorf("ForwardPorts: %v", err)
				}
			}()
			<-ready
			ports, err := pf.GetPorts()
			if err != nil || len(ports) != 3 {
				t.Fatalf("ports %v, %v", ports, err)
			}
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Go(func() {
					c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ports[i%2].Local))
					if err != nil {
						t.Error(err)
						return
					}
					defer c.Close()
					msg := fmt.Sprintf("connection %d", i)
					if _, err := io.WriteString(c, msg); err != nil {
						t.Error(err)
						return
					}
					buf := make([]byte, len(msg))
					if _, err := io.ReadFull(c, buf); err != nil || string(buf) != msg {
						t.Errorf("connection %d echoed %q, %v", i, buf, err)
					}
				})
			}
			wg.Wait()
			// The pod closing its side reaches the client as an end of stream.
			c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ports[2].Local))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			if got, err := io.ReadAll(c); err != nil || string(got) != "bye" {
				t.Fatalf("from a server that closes: %q, %v; want bye and the end", got, err)
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dialedNS) != 18 || dialedNS[0] != "pod-ns:8080" && dialedNS[0] != "pod-ns:9090" {
		t.Fatalf("dialled %v, want 18 connections into pod-ns", dialedNS)
	}
}

package builtin

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// started runs a server on 127.0.0.1 and returns the addresses it bound, by network,
// once `want` listeners are up, and a channel giving Run's result.
func started(t *testing.T, name string, args []string, want int) (map[string][]string, context.CancelFunc, <-chan error) {
	t.Helper()
	var mu sync.Mutex
	addrs := map[string][]string{}
	up := make(chan struct{}, 8)
	s := &Server{
		ListenHost: "127.0.0.1",
		Hostname:   func() (string, error) { return "web-0", nil },
		Listening: func(network string, a net.Addr) {
			mu.Lock()
			addrs[network] = append(addrs[network], a.String())
			mu.Unlock()
			up <- struct{}{}
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, name, args, io.Discard, io.Discard) }()
	for range want {
		select {
		case <-up:
		case err := <-done:
			cancel()
			t.Fatalf("%s exited before listening: %v", name, err)
		case <-time.After(5 * time.Second):
			cancel()
			t.Fatalf("%s did not listen", name)
		}
	}
	t.Cleanup(cancel)
	mu.Lock()
	defer mu.Unlock()
	return addrs, cancel, done
}

func udp(t *testing.T, addr, msg string) string {
	t.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}

func stopped(t *testing.T, cancel context.CancelFunc, done <-chan error) error {
	t.Helper()
	cancel()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("server did not stop")
		return nil
	}
}

func TestEcho(t *testing.T) {
	addrs, cancel, done := started(t, "echo", []string{"--port=0", "--port=0", "--udp-port=0"}, 3)
	for _, a := range addrs["tcp"] {
		c, err := net.Dial("tcp", a)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = c.Write([]byte("ping\n"))
		line, err := bufio.NewReader(c).ReadString('\n')
		_ = c.Close()
		if err != nil || line != "ping\n" {
			t.Errorf("tcp echo on %s = %q, %v", a, line, err)
		}
	}
	if got := udp(t, addrs["udp"][0], "pong"); got != "pong" {
		t.Errorf("udp echo %q", got)
	}
	if err := stopped(t, cancel, done); err != nil {
		t.Error(err)
	}
}

func TestPauseAndErrors(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, "pause", nil, io.Discard, io.Discard) }()
	select {
	case err := <-done:
		t.Fatalf("pause returned early: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	if err := stopped(t, cancel, done); err != nil {
		t.Errorf("pause = %v", err)
	}

	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "netexec", want: `unknown built-in server "netexec" (built in: [echo pause])`},
		{name: "echo", args: []string{"--bogus"}, want: "echo: flag provided but not defined: -bogus"},
		{name: "echo", args: []string{"--port=x"}, want: `echo: invalid value "x" for flag -port: invalid port "x"`},
		{name: "pause", args: []string{"extra"}, want: `pause: unexpected arguments ["extra"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name+strings.Join(tt.args, ""), func(t *testing.T) {
			err := Run(context.Background(), tt.name, tt.args, io.Discard, io.Discard)
			if err == nil || err.Error() != tt.want {
				t.Errorf("Run = %v, want %q", err, tt.want)
			}
		})
	}
	if !Has("echo") || Has("netexec") {
		t.Error("Has is wrong")
	}
}

// TestEchoAnswersHTTP: the stand-in for an unknown image passes HTTP probes.
func TestEchoAnswersHTTP(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	srv := &Server{ListenHost: "127.0.0.1", Hostname: func() (string, error) { return "api-1", nil }}
	go func() { _ = srv.Run(ctx, "echo", []string{"--port", strconv.Itoa(port)}, io.Discard, io.Discard) }()
	var resp *http.Response
	for i := 0; i < 100; i++ {
		if resp, err = http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port)); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "GET /healthz from api-1\n" {
		t.Fatalf("HTTP through echo: %d %q", resp.StatusCode, body)
	}
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Write([]byte("ping\n"))
	buf := make([]byte, 5)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping\n" {
		t.Fatalf("raw echo: %q %v", buf, err)
	}
}

package builtin

import (
	"bytes"
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// tcpAnswer listens on loopback and answers each connection's first line as agnhost
// netexec's TCP server does (the answer, then close); it returns the port.
func tcpAnswer(t *testing.T, answer string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 1024)
				if _, err := c.Read(buf); err != nil {
					return
				}
				c.Write([]byte(answer))
			}()
		}
	}()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// udpAnswer answers every datagram "hostName\n" with answer, as netexec's UDP server.
func udpAnswer(t *testing.T, answer string) string {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 1024)
		for {
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			if strings.TrimSpace(string(buf[:n])) == "hostName" {
				c.WriteTo([]byte(answer), from)
			}
		}
	}()
	return strconv.Itoa(c.LocalAddr().(*net.UDPAddr).Port)
}

// closedPort returns a loopback port nothing listens on (TCP and UDP).
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return strconv.Itoa(p)
}

// TestNC runs the command lines Kubernetes' e2e framework runs in agnhost pods
// (service reachability: `echo hostName | nc -v -t -w 2 HOST PORT`; node-pod UDP:
// `echo hostName | nc -w 1 -u IP PORT`, whose stderr must stay empty) and netcat's
// failures.
func TestNC(t *testing.T) {
	tcp := tcpAnswer(t, "pod-a")
	udp := udpAnswer(t, "pod-b")
	closed := closedPort(t)
	tests := []struct {
		name   string
		args   []string
		stdin  string
		code   int
		stdout string
		stderr string // a prefix; "" means stderr must be empty
	}{
		{name: "tcp verbose", args: []string{"-v", "-t", "-w", "2", "127.0.0.1", tcp}, stdin: "hostName\n",
			stdout: "pod-a", stderr: "Connection to 127.0.0.1 " + tcp + " port [tcp/*] succeeded!\n"},
		{name: "tcp by name", args: []string{"-w2", "localhost", tcp}, stdin: "hostName\n", stdout: "pod-a"},
		{name: "udp", args: []string{"-w", "1", "-u", "127.0.0.1", udp}, stdin: "hostName\n", stdout: "pod-b"},
		{name: "udp verbose combined flags", args: []string{"-vuw", "1", "127.0.0.1", udp}, stdin: "hostName\n",
			stdout: "pod-b", stderr: "Connection to 127.0.0.1 " + udp + " port [udp/*] succeeded!\n"},
		{name: "udp receive limit", args: []string{"-u", "-W", "1", "127.0.0.1", udp}, stdin: "hostName\n", stdout: "pod-b"},
		{name: "zero io", args: []string{"-zv", "-w", "2", "127.0.0.1", tcp},
			stderr: "Connection to 127.0.0.1 " + tcp + " port [tcp/*] succeeded!\n"},
		{name: "refused", args: []string{"-w", "2", "127.0.0.1", closed}, code: 1,
			stderr: "nc: connect to 127.0.0.1 port " + closed + " (tcp) failed: Connection refused\n"},
		{name: "udp zero refused", args: []string{"-zu", "127.0.0.1", closed}, code: 1,
			stderr: "nc: connect to 127.0.0.1 port " + closed + " (udp) failed: Connection refused\n"},
		{name: "no port", args: []string{"-v", "127.0.0.1"}, code: 1, stderr: "nc: destination and port are required\nusage: nc "},
		{name: "bad option", args: []string{"-X", "127.0.0.1", "80"}, code: 1, stderr: "nc: invalid option -- X\n"},
		{name: "bad port", args: []string{"127.0.0.1", "http"}, code: 1, stderr: "nc: port number invalid: http\n"},
		{name: "listen", args: []string{"-l", "-p", "80"}, code: 1, stderr: "nc: listen mode (-l) is not in tranche's nc"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := ncMain(context.Background(), tc.args, strings.NewReader(tc.stdin), &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit status %d, want %d (stderr %q)", code, tc.code, stderr.String())
			}
			if stdout.String() != tc.stdout {
				t.Errorf("stdout %q, want %q", stdout.String(), tc.stdout)
			}
			if tc.stderr == "" && stderr.Len() > 0 || !strings.HasPrefix(stderr.String(), tc.stderr) {
				t.Errorf("stderr %q, want %q", stderr.String(), tc.stderr)
			}
		})
	}
}

// TestNCIdle checks -w as an idle timeout: a server that answers and then keeps the
// connection open ends nc after -w of silence, with what it said on stdout; without
// -w nc waits until its context ends.
func TestNCIdle(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello"))
			defer c.Close()
		}
	}()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)

	var stdout bytes.Buffer
	if code := ncMain(context.Background(), []string{"-w", "1", "127.0.0.1", port}, strings.NewReader(""), &stdout, io.Discard); code != 0 || stdout.String() != "hello" {
		t.Errorf("-w 1: exit %d, stdout %q; want 0, %q", code, stdout.String(), "hello")
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		done <- ncMain(ctx, []string{"127.0.0.1", port}, strings.NewReader(""), io.Discard, io.Discard)
	}()
	select {
	case code := <-done:
		t.Fatalf("nc without -w ended (exit %d) while the peer kept the connection open", code)
	case <-time.After(1500 * time.Millisecond):
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("cancelled: exit %d, want 0", code)
	}
}

// TestMainNC starts the binary as /usr/bin/nc is started in the agnhost image (a link
// named nc): Main runs netcat with the process's stdin.
func TestMainNC(t *testing.T) {
	port := tcpAnswer(t, "pod-c")
	cmd := program(t, "nc", "-v", "-t", "-w", "2", "127.0.0.1", port)
	cmd.Stdin = strings.NewReader("hostName\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || string(out) != "pod-c" || !strings.Contains(stderr.String(), "succeeded!") {
		t.Errorf("nc: %v, stdout %q, stderr %q; want success, %q", err, out, stderr.String(), "pod-c")
	}
}

package builtin

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWget runs the command lines the e2e framework and the seeds use against a local
// server, with busybox's outputs and exit statuses.
func TestWget(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/hostname":
			fmt.Fprint(w, "web-0")
		case "/slow":
			time.Sleep(3 * time.Second)
		case "/moved":
			http.Redirect(w, r, "/hostname", http.StatusFound)
		case "/echo":
			body := new(bytes.Buffer)
			_, _ = body.ReadFrom(r.Body)
			fmt.Fprintf(w, "%s %s %s %s", r.Method, r.Header.Get("User-Agent"), r.Header.Get("X-Test"), body)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	refused := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return addr
	}()
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, tc := range []struct {
		name           string
		args           []string
		code           int
		stdout, stderr string
	}{
		{name: "the framework's check", args: []string{"-T", "1", "-q", "-O", "-", srv.URL + "/hostname"}, stdout: "web-0"},
		{name: "bundled", args: []string{"-T1", "-qO-", host + "/hostname"}, stdout: "web-0"},
		{name: "redirect followed", args: []string{"-qO-", srv.URL + "/moved"}, stdout: "web-0"},
		{name: "not quiet", args: []string{"-O", "-", srv.URL + "/hostname"}, stdout: "web-0",
			stderr: "Connecting to " + host + " (" + host + ")\nwriting to stdout\nwritten to stdout\n"},
		{name: "404", args: []string{"-qO-", srv.URL + "/nope"}, code: 1, stderr: "wget: server returned error: HTTP/1.1 404 Not Found\n"},
		{name: "spider", args: []string{"--spider", srv.URL + "/hostname"}, stderr: "Connecting to " + host + " (" + host + ")\nremote file exists\n"},
		{name: "refused", args: []string{"-T", "2", "-qO-", "http://" + refused + "/"}, code: 1,
			stderr: "wget: can't connect to remote host (127.0.0.1): Connection refused\n"},
		{name: "timeout", args: []string{"-T", "1", "-qO-", srv.URL + "/slow"}, code: 1, stderr: "wget: download timed out\n"},
		{name: "post, user agent and header", args: []string{"-qO-", "-U", "e2e", "--header", "X-Test: yes", "--post-data", "a=b", srv.URL + "/echo"},
			stdout: "POST e2e yes a=b"},
		{name: "no url", args: []string{"-q"}, code: 1, stderr: wgetUsage},
		{name: "unknown option", args: []string{"-Z", srv.URL}, code: 1, stderr: "wget: invalid option -- 'Z'\n" + wgetUsage},
		{name: "missing value", args: []string{srv.URL, "-T"}, code: 1, stderr: "wget: option requires an argument -- 'T'\n" + wgetUsage},
		{name: "bad timeout", args: []string{"-T", "x", srv.URL}, code: 1, stderr: "wget: invalid number 'x'\n" + wgetUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := wgetMain(context.Background(), tc.args, &stdout, &stderr)
			if code != tc.code || stdout.String() != tc.stdout || stderr.String() != tc.stderr {
				t.Fatalf("wget %q: code %d stdout %q stderr %q, want %d %q %q", tc.args, code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.stderr)
			}
		})
	}

	t.Run("saves under the URL's name, never over a file", func(t *testing.T) {
		dir := t.TempDir()
		var stdout, stderr bytes.Buffer
		if code := wgetMain(context.Background(), []string{"-q", "-P", dir, srv.URL + "/hostname"}, &stdout, &stderr); code != 0 {
			t.Fatalf("code %d: %s", code, stderr.String())
		}
		if data, err := os.ReadFile(filepath.Join(dir, "hostname")); err != nil || string(data) != "web-0" {
			t.Fatalf("saved file: %q %v", data, err)
		}
		stderr.Reset()
		code := wgetMain(context.Background(), []string{"-q", "-P", dir, srv.URL + "/hostname"}, &stdout, &stderr)
		if want := "wget: can't open '" + filepath.Join(dir, "hostname") + "': File exists\n"; code != 1 || stderr.String() != want {
			t.Fatalf("second fetch: code %d stderr %q, want 1 %q", code, stderr.String(), want)
		}
	})
}

package shim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Client talks to the shim of a node over its socket.
type Client struct {
	socket string
	hc     *http.Client
}

// NewClient is a client of the shim whose directory is dir.
func NewClient(dir string) *Client {
	socket := filepath.Join(dir, SocketName)
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}
	return &Client{socket: socket, hc: &http.Client{Transport: &http.Transport{DialContext: dial, MaxIdleConnsPerHost: 8}}}
}

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://shim"+path, rd)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("shim: %w", err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%w: %s", ErrNotFound, path)
	case resp.StatusCode >= 300:
		var e errorBody
		_ = json.NewDecoder(resp.Body).Decode(&e)
		if e.Error == "" {
			e.Error = resp.Status
		}
		return errors.New(e.Error)
	case out != nil:
		return json.NewDecoder(resp.Body).Decode(out)
	}
	return nil
}

// Ping checks that the shim answers.
func (c *Client) Ping(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/containers", nil, &[]Container{})
}

// Start starts a container and returns once its process runs; the error of a
// container that could not start is runc's reason.
func (c *Client) Start(ctx context.Context, req StartRequest) (Container, error) {
	var out Container
	err := c.do(ctx, http.MethodPost, "/containers", req, &out)
	return out, err
}

// List returns every container the shim runs or has seen exit and not forgotten.
func (c *Client) List(ctx context.Context) ([]Container, error) {
	var out []Container
	err := c.do(ctx, http.MethodGet, "/containers", nil, &out)
	return out, err
}

// Wait returns once the container has exited, with its exit code.
func (c *Client) Wait(ctx context.Context, id string) (Container, error) {
	var out Container
	err := c.do(ctx, http.MethodGet, "/containers/"+url.PathEscape(id)+"/wait", nil, &out)
	return out, err
}

// Forget drops an exited container's record.
func (c *Client) Forget(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/containers/"+url.PathEscape(id), nil, nil)
}

// Attach connects the streams to a running container until it exits, ctx ends or the
// connection fails. stdin (may be nil) is the client's input; resize (may be nil)
// carries terminal sizes, width then height.
func (c *Client) Attach(ctx context.Context, id string, stdin io.Reader, stdout, stderr io.Writer, resize <-chan [2]uint16) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.socket)
	if err != nil {
		return fmt.Errorf("shim: %w", err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	q := url.Values{}
	for name, on := range map[string]bool{"stdin": stdin != nil, "stdout": stdout != nil, "stderr": stderr != nil} {
		if on {
			q.Set(name, "1")
		}
	}
	req, err := http.NewRequest(http.MethodGet, "http://shim/containers/"+url.PathEscape(id)+"/attach?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", upgradeProto)
	if err := req.Write(conn); err != nil {
		return fmt.Errorf("shim: %w", err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return fmt.Errorf("shim: %w", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusNotFound {
			return fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		return fmt.Errorf("shim: attach answered %s", resp.Status)
	}
	done := make(chan struct{})
	defer close(done)
	err = attachClient(struct {
		io.Reader
		io.Writer
	}{br, conn}, stdin, stdout, stderr, resize, done)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// Ensure returns a client of the shim in dir, starting one with cmd (in a session of
// its own, so that it outlives the caller) when none answers.
func Ensure(ctx context.Context, dir string, cmd *exec.Cmd) (*Client, error) {
	c := NewClient(dir)
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err := c.Ping(pctx)
	cancel()
	if err == nil {
		return c, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the shim: %w", err)
	}
	// Not waited for: it outlives this process. Its exit is reaped by whoever
	// inherits it (this process's own reaper while it lives).
	go func() { _ = cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := c.Ping(pctx)
		cancel()
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("the shim in %s does not answer: %w", dir, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

package dns

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Relay passes DNS messages unchanged between clients and upstream resolvers, over
// UDP and TCP. `tranche up` runs one on the underlay so that the cluster's DNS pods,
// which have no route out of the cluster network, reach the host's resolvers: its
// sockets are opened inside the underlay namespace, its upstream sockets in the
// process's own (the host's).
type Relay struct {
	// Upstreams are tried in order until one answers.
	Upstreams []string
	// Timeout bounds one upstream exchange (2 s when 0).
	Timeout time.Duration
	Logger  *slog.Logger
}

// maxRelayInFlight bounds the UDP queries relayed at once; more are dropped (the
// client retries), which keeps a flood from exhausting the host's sockets.
const maxRelayInFlight = 256

// Serve relays what arrives on pc and ln until ctx ends, then closes them.
func (r *Relay) Serve(ctx context.Context, pc net.PacketConn, ln net.Listener) error {
	if len(r.Upstreams) == 0 {
		return errors.New("DNS relay: no upstream resolver")
	}
	log := r.Logger
	if log == nil {
		log = slog.Default()
	}
	var wg sync.WaitGroup
	go func() {
		<-ctx.Done()
		pc.Close()
		ln.Close()
	}()
	wg.Add(2)
	go func() { defer wg.Done(); r.serveUDP(pc, log) }()
	go func() { defer wg.Done(); r.serveTCP(ln, log) }()
	wg.Wait()
	return nil
}

func (r *Relay) timeout() time.Duration {
	if r.Timeout > 0 {
		return r.Timeout
	}
	return 2 * time.Second
}

func (r *Relay) serveUDP(pc net.PacketConn, log *slog.Logger) {
	sem := make(chan struct{}, maxRelayInFlight)
	buf := make([]byte, 65535)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				log.Warn("DNS relay: reading", "err", err)
			}
			return
		}
		if n < 12 {
			continue
		}
		msg := append([]byte(nil), buf[:n]...)
		select {
		case sem <- struct{}{}:
		default:
			continue
		}
		go func() {
			defer func() { <-sem }()
			resp, err := r.exchange("udp", msg)
			if err != nil {
				log.Debug("DNS relay", "err", err)
				if resp = serverFailure(msg); resp == nil {
					return
				}
			}
			_, _ = pc.WriteTo(resp, from)
		}()
	}
}

func (r *Relay) serveTCP(ln net.Listener, log *slog.Logger) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				log.Warn("DNS relay: accepting", "err", err)
			}
			return
		}
		go func() {
			defer c.Close()
			br := bufio.NewReader(c)
			for {
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				msg, err := readTCPMsg(br)
				if err != nil {
					return
				}
				resp, err := r.exchange("tcp", msg)
				if err != nil {
					log.Debug("DNS relay", "err", err)
					if resp = serverFailure(msg); resp == nil {
						return
					}
				}
				if writeTCPMsg(c, resp) != nil {
					return
				}
			}
		}()
	}
}

// exchange sends msg to the upstreams in turn and returns the first answer whose id
// matches.
func (r *Relay) exchange(network string, msg []byte) ([]byte, error) {
	var errs []error
	for _, up := range r.Upstreams {
		resp, err := r.exchangeOne(network, up, msg)
		if err == nil {
			return resp, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", up, err))
	}
	return nil, errors.Join(errs...)
}

func (r *Relay) exchangeOne(network, up string, msg []byte) ([]byte, error) {
	c, err := net.DialTimeout(network, up, r.timeout())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(r.timeout()))
	if network == "tcp" {
		if err := writeTCPMsg(c, msg); err != nil {
			return nil, err
		}
		resp, err := readTCPMsg(bufio.NewReader(c))
		if err != nil {
			return nil, err
		}
		if len(resp) < 2 || resp[0] != msg[0] || resp[1] != msg[1] {
			return nil, errors.New("answer id does not match")
		}
		return resp, nil
	}
	if _, err := c.Write(msg); err != nil {
		return nil, err
	}
	buf := make([]byte, 65535)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return nil, err
		}
		if n >= 12 && buf[0] == msg[0] && buf[1] == msg[1] {
			return append([]byte(nil), buf[:n]...), nil
		}
	}
}

func readTCPMsg(r io.Reader) ([]byte, error) {
	var l [2]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint16(l[:])
	if n < 12 {
		return nil, fmt.Errorf("DNS message of %d bytes", n)
	}
	msg := make([]byte, n)
	_, err := io.ReadFull(r, msg)
	return msg, err
}

func writeTCPMsg(w io.Writer, msg []byte) error {
	out := make([]byte, 2+len(msg))
	binary.BigEndian.PutUint16(out, uint16(len(msg)))
	copy(out[2:], msg)
	_, err := w.Write(out)
	return err
}

// ResolvConfUpstreams returns the nameservers of a resolv.conf file as IP:53
// addresses.
func ResolvConfUpstreams(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "nameserver" {
			continue
		}
		a, err := netip.ParseAddr(f[1])
		if err != nil {
			continue
		}
		out = append(out, netip.AddrPortFrom(a, 53).String())
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s names no nameserver", path)
	}
	return out, nil
}

// serverFailure is the SERVFAIL answer to msg, telling the client at once that no
// upstream answered (rather than letting it time out); nil when msg does not parse.
func serverFailure(msg []byte) []byte {
	req := new(dns.Msg)
	if req.Unpack(msg) != nil || req.Response {
		return nil
	}
	resp := new(dns.Msg)
	resp.SetRcode(req, dns.RcodeServerFailure)
	resp.RecursionAvailable = true
	out, err := resp.Pack()
	if err != nil {
		return nil
	}
	return out
}

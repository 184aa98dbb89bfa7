package publisher

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"

	v1 "k8s.io/api/core/v1"
)

// Host opens the publisher's sockets on the host and knows which ones it holds, so it
// can tell whether a port of an address is held by another program: the servicelb
// controller asks before handing out a load-balancer address, since two local
// clusters on one machine draw from the same default pool and only one of them can
// listen on 127.0.10.1:80. Its methods are safe for concurrent use.
type Host struct {
	listen       func(network, addr string) (net.Listener, error)
	listenPacket func(network, addr string) (net.PacketConn, error)
	changed      chan struct{}

	// mu serialises trial binds with the publisher's own, so that a trial never
	// makes a real one fail.
	mu   sync.Mutex
	held map[Listener]bool
}

// NewHost returns a Host opening sockets with listen and listenPacket; nil means
// net.Listen and net.ListenPacket.
func NewHost(listen func(network, addr string) (net.Listener, error), listenPacket func(network, addr string) (net.PacketConn, error)) *Host {
	if listen == nil {
		listen = net.Listen
	}
	if listenPacket == nil {
		listenPacket = net.ListenPacket
	}
	return &Host{listen: listen, listenPacket: listenPacket, changed: make(chan struct{}, 1), held: map[Listener]bool{}}
}

// Taken reports whether another program holds the port of addr for protocol: the
// publisher does not hold it and binding it fails with "address already in use". Any
// other failure (permissions, say) is not an answer about other programs: the
// publisher's own attempt reports it.
func (h *Host) Taken(protocol v1.Protocol, addr netip.AddrPort) bool {
	l := Listener{Protocol: protocol, Addr: addr}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held[l] {
		return false
	}
	ln, pc, err := h.bind(l)
	switch {
	case ln != nil:
		ln.Close()
	case pc != nil:
		pc.Close()
	}
	return errors.Is(err, syscall.EADDRINUSE)
}

// Changed receives a value after the publisher failed to listen on a load-balancer
// address because another program holds it.
func (h *Host) Changed() <-chan struct{} { return h.changed }

// open binds l for the publisher and records it as held.
func (h *Host) open(l Listener) (net.Listener, net.PacketConn, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ln, pc, err := h.bind(l)
	if err == nil {
		h.held[l] = true
	}
	return ln, pc, err
}

// release records that the publisher closed l.
func (h *Host) release(l Listener) {
	h.mu.Lock()
	delete(h.held, l)
	h.mu.Unlock()
}

// lost tells the controller that an assigned address is held by another program;
// signals while one is pending coalesce.
func (h *Host) lost() {
	select {
	case h.changed <- struct{}{}:
	default:
	}
}

func (h *Host) bind(l Listener) (net.Listener, net.PacketConn, error) {
	switch l.Protocol {
	case v1.ProtocolTCP:
		ln, err := h.listen("tcp", l.Addr.String())
		return ln, nil, err
	case v1.ProtocolUDP:
		pc, err := h.listenPacket("udp", l.Addr.String())
		return nil, pc, err
	default:
		return nil, nil, fmt.Errorf("protocol %s is not published", l.Protocol)
	}
}

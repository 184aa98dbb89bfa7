package stream

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	gwebsocket "github.com/gorilla/websocket"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	"k8s.io/client-go/tools/portforward"

	"github.com/tranche/tranche/internal/netns"
)

// portForwardProtocol is the SPDY subprotocol of port forwarding; tunnelPrefix
// prefixes it when the SPDY connection is carried in a WebSocket.
const (
	portForwardProtocol = "portforward.k8s.io"
	tunnelPrefix        = "SPDY/3.1+"
	// copyBuffer is the read size of a forwarded connection: one SPDY data frame per
	// read, so larger reads mean fewer frames for both ends to handle.
	copyBuffer = 256 << 10
)

// dialPod connects to localhost:port inside a pod's network namespace, as kubelet's
// port-forward does.
func dialPod(ns string, port uint16) (net.Conn, error) {
	return netns.Dial(ns, "tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))), 10*time.Second)
}

// servePortForward upgrades to SPDY (or SPDY in a WebSocket) and forwards each pair of
// streams (error, data) the client opens for one connection to the pod's port.
func (s *Server) servePortForward(w http.ResponseWriter, r *http.Request, pod string, uid types.UID) {
	ns, ok := s.cfg.Runtime.PodNetNS(uid)
	if !ok {
		badRequest(w, "pod %s is not running on this node", pod)
		return
	}
	pf := &forwarder{s: s, pod: pod, ns: ns, pairs: map[string]*streamPair{}}
	var conn httpstream.Connection
	if wsstream.IsWebSocketRequestWithTunnelingProtocol(r) {
		up := gwebsocket.Upgrader{Subprotocols: []string{tunnelPrefix + portForwardProtocol}, CheckOrigin: func(*http.Request) bool { return true },
			ReadBufferSize: 64 << 10, WriteBufferSize: copyBuffer + 64}
		ws, err := up.Upgrade(batchingWriter{w}, r, nil)
		if err != nil {
			// Upgrade wrote the response.
			return
		}
		tunnel := portforward.NewTunnelingConnection("agent", ws)
		conn, err = spdy.NewServerConnection(websocketFrames(tunnel, ws), pf.newStream)
		if err != nil {
			tunnel.Close()
			return
		}
	} else {
		if _, err := httpstream.Handshake(r, w, []string{portForwardProtocol}); err != nil {
			return
		}
		conn = upgradeSPDY(w, r, pf.newStream)
		if conn == nil {
			return
		}
	}
	defer conn.Close()
	conn.SetIdleTimeout(s.cfg.StreamIdleTimeout)
	pf.mu.Lock()
	pf.conn = conn
	pf.mu.Unlock()
	<-conn.CloseChan()
	pf.closeAll()
}

// forwarder is one port-forward session.
type forwarder struct {
	s    *Server
	pod  string
	ns   string
	conn httpstream.Connection

	mu     sync.Mutex
	pairs  map[string]*streamPair
	closed bool
	open   []net.Conn
	wg     sync.WaitGroup
}

// streamPair is the error and data streams of one forwarded connection.
type streamPair struct {
	port        uint16
	errorStream httpstream.Stream
	dataStream  httpstream.Stream
	replies     []<-chan struct{}
}

func (pf *forwarder) newStream(st httpstream.Stream, reply <-chan struct{}) error {
	h := st.Headers()
	id := h.Get(v1.PortForwardRequestIDHeader)
	port, err := strconv.ParseUint(h.Get(v1.PortHeader), 10, 16)
	if err != nil || port == 0 {
		return fmt.Errorf("port-forward stream: invalid port %q", h.Get(v1.PortHeader))
	}
	pf.mu.Lock()
	defer pf.mu.Unlock()
	if pf.closed {
		return fmt.Errorf("port-forward session closed")
	}
	p := pf.pairs[id]
	if p == nil {
		p = &streamPair{port: uint16(port)}
		pf.pairs[id] = p
	}
	switch h.Get(v1.StreamType) {
	case v1.StreamTypeError:
		p.errorStream = st
	case v1.StreamTypeData:
		p.dataStream = st
	default:
		return fmt.Errorf("port-forward stream: unknown stream type %q", h.Get(v1.StreamType))
	}
	p.replies = append(p.replies, reply)
	if p.errorStream != nil && p.dataStream != nil {
		delete(pf.pairs, id)
		pf.wg.Go(func() { pf.forward(p) })
	}
	return nil
}

// forward copies between one stream pair and a new connection to the pod's port.
func (pf *forwarder) forward(p *streamPair) {
	for _, r := range p.replies {
		<-r
	}
	defer func() {
		pf.mu.Lock()
		conn := pf.conn
		pf.mu.Unlock()
		if conn != nil {
			conn.RemoveStreams(p.errorStream, p.dataStream)
		}
	}()
	defer p.errorStream.Close()
	defer p.dataStream.Close()
	c, err := pf.s.cfg.DialPod(pf.ns, p.port)
	if err != nil {
		fmt.Fprintf(p.errorStream, "error forwarding port %d to pod %s: %v", p.port, pf.pod, err)
		return
	}
	if !pf.track(c) {
		c.Close()
		return
	}
	defer pf.untrack(c)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.CopyBuffer(c, p.dataStream, make([]byte, copyBuffer))
		if tc, ok := c.(interface{ CloseWrite() error }); ok {
			_ = tc.CloseWrite()
		}
	}()
	// readerOnly hides the connection's WriteTo, which would copy through its own 32 KiB
	// buffer: the reads must be copyBuffer large to make large frames.
	_, _ = io.CopyBuffer(p.dataStream, readerOnly{c}, make([]byte, copyBuffer))
	// The pod's side ended: say so to the client (a half-close of the stream), whose
	// own end of the stream then ends the copy above.
	p.dataStream.Close()
	c.Close()
	<-done
}

// readerOnly is a Reader and nothing else (no WriterTo for io.Copy to prefer).
type readerOnly struct{ io.Reader }

func (pf *forwarder) track(c net.Conn) bool {
	pf.mu.Lock()
	defer pf.mu.Unlock()
	if pf.closed {
		return false
	}
	pf.open = append(pf.open, c)
	return true
}

func (pf *forwarder) untrack(c net.Conn) {
	pf.mu.Lock()
	defer pf.mu.Unlock()
	for i, o := range pf.open {
		if o == c {
			pf.open = append(pf.open[:i], pf.open[i+1:]...)
			break
		}
	}
}

// closeAll ends every forwarded connection once the client's connection is gone.
func (pf *forwarder) closeAll() {
	pf.mu.Lock()
	pf.closed = true
	for _, c := range pf.open {
		c.Close()
	}
	for _, p := range pf.pairs {
		for _, st := range []httpstream.Stream{p.errorStream, p.dataStream} {
			if st != nil {
				_ = st.Reset()
			}
		}
	}
	pf.mu.Unlock()
	pf.wg.Wait()
}

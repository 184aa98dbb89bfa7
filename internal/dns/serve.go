package dns

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/miekg/dns"
)

// Serve answers with h on an already-open UDP socket and TCP listener (either may be
// nil) until ctx ends, then stops both and returns. Requests that are responses are
// dropped; the library answers FORMERR (or NOTIMP) for headers it cannot accept and
// messages it cannot parse, and everything else reaches h.
func Serve(ctx context.Context, h dns.Handler, pc net.PacketConn, ln net.Listener) error {
	var servers []*dns.Server
	if pc != nil {
		servers = append(servers, &dns.Server{PacketConn: pc, Handler: h, MsgAcceptFunc: accept, UDPSize: 1232})
	}
	if ln != nil {
		servers = append(servers, &dns.Server{Listener: ln, Handler: h, MsgAcceptFunc: accept,
			ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second, IdleTimeout: func() time.Duration { return 10 * time.Second }})
	}
	errc := make(chan error, len(servers))
	for _, s := range servers {
		go func() { errc <- s.ActivateAndServe() }()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	for _, s := range servers {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = s.ShutdownContext(sctx)
		cancel()
	}
	if ctx.Err() != nil {
		return nil
	}
	return errors.Join(errors.New("DNS server stopped"), err)
}

// accept is the library's default check without its limits on the counts of answer,
// authority and additional records, which Respond judges itself: a response is
// ignored, an opcode other than QUERY is NOTIMP, a question count other than one
// FORMERR.
func accept(dh dns.Header) dns.MsgAcceptAction {
	const qr = 1 << 15
	if dh.Bits&qr != 0 {
		return dns.MsgIgnore
	}
	if op := int(dh.Bits>>11) & 0xF; op != dns.OpcodeQuery {
		return dns.MsgRejectNotImplemented
	}
	if dh.Qdcount != 1 {
		return dns.MsgReject
	}
	return dns.MsgAccept
}

package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	"k8s.io/apimachinery/pkg/util/remotecommand"

	"github.com/tranche/tranche/internal/agent/runtime"
)

// rcOptions are the query parameters of exec and attach.
type rcOptions struct {
	stdin, stdout, stderr, tty bool
}

func parseRCOptions(r *http.Request) rcOptions {
	q := r.URL.Query()
	o := rcOptions{stdin: isTrue(q.Get("stdin")), stdout: isTrue(q.Get("stdout")), stderr: isTrue(q.Get("stderr")), tty: isTrue(q.Get("tty"))}
	if o.tty {
		// A terminal has one output stream.
		o.stderr = false
	}
	return o
}

// session runs one exec or attach with the client's streams; code is the exit code to
// report (exec) and err a failure to report instead.
type session func(ctx context.Context, s runtime.Streams) (code int, err error)

func (s *Server) serveExec(w http.ResponseWriter, r *http.Request, pod string, uid types.UID, container string) {
	argv := r.URL.Query()["command"]
	if len(argv) == 0 {
		badRequest(w, "you must specify at least one command for the container")
		return
	}
	opts := parseRCOptions(r)
	if !opts.stdin && !opts.stdout && !opts.stderr {
		badRequest(w, "you must specify at least one of stdin, stdout, stderr")
		return
	}
	if !s.cfg.Runtime.ContainerRunning(uid, container) {
		badRequest(w, "container not found (%q)", container)
		return
	}
	log := s.log.With("pod", pod, "container", container, "command", strings.Join(argv, " "))
	s.serveRemoteCommand(w, r, opts, log, func(ctx context.Context, st runtime.Streams) (int, error) {
		code, err := s.cfg.Runtime.ExecStream(ctx, uid, container, argv, st)
		if err == nil && code != 0 {
			return code, fmt.Errorf("command terminated with non-zero exit code: error executing command [%s], exit code %d", strings.Join(argv, " "), code)
		}
		return code, err
	})
}

func (s *Server) serveAttach(w http.ResponseWriter, r *http.Request, pod string, uid types.UID, container string) {
	opts := parseRCOptions(r)
	if !opts.stdin && !opts.stdout && !opts.stderr {
		badRequest(w, "you must specify at least one of stdin, stdout, stderr")
		return
	}
	if !s.cfg.Runtime.ContainerRunning(uid, container) {
		badRequest(w, "container not found (%q)", container)
		return
	}
	s.serveRemoteCommand(w, r, opts, s.log.With("pod", pod, "container", container, "attach", true), func(ctx context.Context, st runtime.Streams) (int, error) {
		return 0, s.cfg.Runtime.Attach(ctx, uid, container, st)
	})
}

// serveRemoteCommand upgrades the request (WebSocket or SPDY), runs the session with
// the streams the client opened and reports its outcome on the error stream. The
// session's context ends when the client's connection goes.
func (s *Server) serveRemoteCommand(w http.ResponseWriter, r *http.Request, opts rcOptions, log *slog.Logger, run session) {
	if wsstream.IsWebSocketRequest(r) {
		s.serveWebSocketCommand(w, r, opts, run)
		return
	}
	protocol, err := httpstream.Handshake(r, w, []string{remotecommand.StreamProtocolV4Name, remotecommand.StreamProtocolV3Name, remotecommand.StreamProtocolV2Name})
	if err != nil {
		// Handshake wrote the response.
		return
	}
	type newStream struct {
		stream httpstream.Stream
		reply  <-chan struct{}
	}
	streams := make(chan newStream, 8)
	conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(st httpstream.Stream, reply <-chan struct{}) error {
		streams <- newStream{st, reply}
		return nil
	})
	if conn == nil {
		return
	}
	defer conn.Close()
	conn.SetIdleTimeout(s.cfg.StreamIdleTimeout)
	want := 1 // error
	for _, b := range []bool{opts.stdin, opts.stdout, opts.stderr, opts.tty && protocol != remotecommand.StreamProtocolV2Name} {
		if b {
			want++
		}
	}
	var st runtime.Streams
	var errStream, resize io.ReadCloser
	var errW io.Writer
	timeout := time.NewTimer(remotecommand.DefaultStreamCreationTimeout)
	defer timeout.Stop()
	var replies []<-chan struct{}
	for got := 0; got < want; got++ {
		select {
		case ns := <-streams:
			replies = append(replies, ns.reply)
			switch ns.stream.Headers().Get(v1.StreamType) {
			case v1.StreamTypeError:
				errStream, errW = ns.stream, ns.stream
			case v1.StreamTypeStdin:
				st.Stdin = ns.stream
			case v1.StreamTypeStdout:
				st.Stdout = ns.stream
			case v1.StreamTypeStderr:
				st.Stderr = ns.stream
			case v1.StreamTypeResize:
				resize = ns.stream
			default:
				log.Debug("unexpected stream type", "type", ns.stream.Headers().Get(v1.StreamType))
				got--
			}
		case <-conn.CloseChan():
			return
		case <-timeout.C:
			log.Debug("timed out waiting for the client's streams", "want", want)
			return
		}
	}
	for _, reply := range replies {
		select {
		case <-reply:
		case <-conn.CloseChan():
			return
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-conn.CloseChan():
			cancel()
		case <-ctx.Done():
		}
	}()
	st.TTY = opts.tty
	if resize != nil {
		st.Resize = decodeSizes(resize, nil)
	}
	code, err := run(ctx, st)
	log.Debug("session ended", "code", code, "err", err)
	if errStream != nil {
		reportOutcome(errW, protocol, code, err)
		errStream.Close()
	}
}

// serveWebSocketCommand is the WebSocket form: one channel per stream, numbered as
// remotecommand says (stdin 0, stdout 1, stderr 2, error 3, resize 4).
func (s *Server) serveWebSocketCommand(w http.ResponseWriter, r *http.Request, opts rcOptions, run session) {
	ch := []wsstream.ChannelType{wsstream.IgnoreChannel, wsstream.IgnoreChannel, wsstream.IgnoreChannel, wsstream.WriteChannel, wsstream.ReadChannel}
	if opts.stdin {
		ch[0] = wsstream.ReadChannel
	}
	if opts.stdout {
		ch[1] = wsstream.WriteChannel
	}
	if opts.stderr {
		ch[2] = wsstream.WriteChannel
	}
	// Kubelet's protocols (cri-streaming's remotecommand), v5 besides: the older
	// channel.k8s.io forms and none at all report a failure as text, v4 and v5 as a
	// Status.
	conn := wsstream.NewConn(map[string]wsstream.ChannelProtocolConfig{
		"":                                              {Binary: true, Channels: ch},
		wsstream.ChannelWebSocketProtocol:               {Binary: true, Channels: ch},
		wsstream.Base64ChannelWebSocketProtocol:         {Binary: false, Channels: ch},
		remotecommand.StreamProtocolV5Name:              {Binary: true, Channels: ch},
		remotecommand.StreamProtocolV4Name:              {Binary: true, Channels: ch},
		"v4." + wsstream.Base64ChannelWebSocketProtocol: {Binary: false, Channels: ch},
	})
	conn.SetIdleTimeout(s.cfg.StreamIdleTimeout)
	protocol, chans, err := conn.Open(w, r)
	if err != nil {
		s.log.Debug("websocket upgrade failed", "err", err)
		return
	}
	defer conn.Close()
	// An empty message on the lowest channel written tells the client the session is
	// established, as kubelet and kube-apiserver send it. Not on v5, which only
	// client-go speaks: it never waits for that message, and client-go up to v1.32
	// (kubectl 1.32 among them) starts reading before it has made its streams, so the
	// message can arrive first and is then logged as "Unknown stream id 1, discarding
	// message" on the user's terminal (fixed in client-go v0.33, kubernetes#131203).
	switch {
	case protocol == remotecommand.StreamProtocolV5Name:
	case opts.stdout:
		_, _ = chans[1].Write(nil)
	case opts.stderr:
		_, _ = chans[2].Write(nil)
	default:
		_, _ = chans[3].Write(nil)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := runtime.Streams{TTY: opts.tty}
	if opts.stdin {
		st.Stdin = chans[0]
	}
	if opts.stdout {
		st.Stdout = chans[1]
	}
	if opts.stderr {
		st.Stderr = chans[2]
	}
	// The client never closes the resize channel: its end means the connection is
	// gone, which must end the session.
	st.Resize = decodeSizes(chans[4], cancel)
	if !opts.tty {
		st.Resize = nil
	}
	code, err := run(ctx, st)
	if strings.HasPrefix(protocol, "v4.base64") {
		protocol = remotecommand.StreamProtocolV4Name
	}
	reportOutcome(chans[3], protocol, code, err)
}

// decodeSizes reads terminal sizes ({"Width":W,"Height":H} objects) until the stream
// ends, then calls gone (may be nil).
func decodeSizes(rd io.Reader, gone func()) <-chan runtime.TermSize {
	out := make(chan runtime.TermSize, 1)
	go func() {
		defer func() {
			if gone != nil {
				gone()
			}
		}()
		dec := json.NewDecoder(rd)
		for {
			var sz struct{ Width, Height uint16 }
			if err := dec.Decode(&sz); err != nil {
				return
			}
			select {
			case out <- runtime.TermSize{Width: sz.Width, Height: sz.Height}:
			default:
				// The previous size was not applied yet: the newest wins.
				select {
				case <-out:
				default:
				}
				out <- runtime.TermSize{Width: sz.Width, Height: sz.Height}
			}
		}
	}()
	return out
}

// reportOutcome writes the session's outcome on the error stream: a Status from v4 on
// (with the exit code as a cause), the error's text before.
func reportOutcome(w io.Writer, protocol string, code int, err error) {
	if protocol != remotecommand.StreamProtocolV4Name && protocol != remotecommand.StreamProtocolV5Name {
		if err != nil {
			_, _ = io.WriteString(w, err.Error())
		}
		return
	}
	st := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess}
	switch {
	case err != nil && code > 0:
		st.Status, st.Reason, st.Message = metav1.StatusFailure, remotecommand.NonZeroExitCodeReason, err.Error()
		st.Details = &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: remotecommand.ExitCodeCauseType, Message: fmt.Sprint(code)}}}
	case err != nil:
		st.Status, st.Reason, st.Message = metav1.StatusFailure, metav1.StatusReasonInternalError, err.Error()
		if errors.Is(err, context.Canceled) {
			return
		}
	}
	b, _ := json.Marshal(st)
	_, _ = w.Write(b)
}

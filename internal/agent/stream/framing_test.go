package stream

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
)

// units records what reaches the connection below a frameConn, one entry per unit.
type units struct {
	got  [][]byte
	cur  *bytes.Buffer
	open bool
}

func (u *units) begin() (io.WriteCloser, error) {
	if u.open {
		panic("a unit began before the previous one ended")
	}
	u.open, u.cur = true, new(bytes.Buffer)
	return u, nil
}
func (u *units) Write(p []byte) (int, error) { return u.cur.Write(p) }
func (u *units) Close() error {
	u.open = false
	u.got = append(u.got, u.cur.Bytes())
	return nil
}

// frame is a SPDY frame header (stream id or control word, then flags and length) and
// its payload.
func frame(word uint32, flags byte, payload []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, word)
	b = binary.BigEndian.AppendUint32(b, uint32(flags)<<24|uint32(len(payload)))
	return append(b, payload...)
}

// TestFrameConnOneUnitPerFrame: however the frames are cut into writes (spdystream's
// three writes, a header split anywhere, two frames in one write, empty payloads), each
// frame reaches the connection below as exactly one unit, in order.
func TestFrameConnOneUnitPerFrame(t *testing.T) {
	data := frame(5, 0, bytes.Repeat([]byte("x"), 70000))
	fin := frame(5, 1, nil)
	ctrl := frame(0x80030001, 0, []byte("syn stream headers"))
	var u units
	c := &frameConn{begin: u.begin}
	writes := [][]byte{
		data[:4], data[4:8], data[8:], // as spdystream writes a data frame
		fin,                             // empty payload
		ctrl[:3], ctrl[3:11], ctrl[11:], // a header split across writes
		append(append([]byte{}, data...), ctrl...), // two frames in one write
	}
	for _, w := range writes {
		if n, err := c.Write(w); err != nil || n != len(w) {
			t.Fatalf("Write(%d bytes) = %d, %v", len(w), n, err)
		}
	}
	want := [][]byte{data, fin, ctrl, data, ctrl}
	if len(u.got) != len(want) {
		t.Fatalf("got %d units, want %d (one per frame)", len(u.got), len(want))
	}
	for i := range want {
		if !bytes.Equal(u.got[i], want[i]) {
			t.Errorf("unit %d: %d bytes, want frame of %d bytes", i, len(u.got[i]), len(want[i]))
		}
	}
	if u.open {
		t.Error("a unit is still open after whole frames")
	}
}

// recordConn records the writes made to it.
type recordConn struct {
	net.Conn
	writes [][]byte
}

func (r *recordConn) Write(p []byte) (int, error) {
	r.writes = append(r.writes, append([]byte(nil), p...))
	return len(p), nil
}

// TestBatchConnHoldsUntilRelease: writes made under a hold leave together, at the last
// release; writes outside a hold pass straight through.
func TestBatchConnHoldsUntilRelease(t *testing.T) {
	rec := &recordConn{}
	c := &batchConn{Conn: rec}
	_, _ = c.Write([]byte("a"))
	c.hold()
	c.hold()
	for _, s := range []string{"b", "c", "d"} {
		if n, err := c.Write([]byte(s)); err != nil || n != 1 {
			t.Fatalf("held Write = %d, %v", n, err)
		}
	}
	if err := c.release(); err != nil || len(rec.writes) != 1 {
		t.Fatalf("after the inner release: %q, %v; want only the first write", rec.writes, err)
	}
	if err := c.release(); err != nil {
		t.Fatal(err)
	}
	_, _ = c.Write([]byte("e"))
	got := make([]string, len(rec.writes))
	for i, w := range rec.writes {
		got[i] = string(w)
	}
	if len(got) != 3 || got[0] != "a" || got[1] != "bcd" || got[2] != "e" {
		t.Fatalf("writes %q, want [a bcd e]", got)
	}
}

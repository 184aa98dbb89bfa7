package shim

import (
	"bytes"
	"io"
	"testing"
)

// TestFirstAttachSeesEarlyOutput: a stdinOnce container (kubectl run -i) that writes
// before kubectl attaches still shows that output to the first client, and only to it.
func TestFirstAttachSeesEarlyOutput(t *testing.T) {
	for _, tc := range []struct {
		name      string
		stdinOnce bool
		want      string
	}{
		{"stdinOnce replays to the first client", true, "early\nlate\n"},
		{"without stdinOnce only what comes after", false, "late\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			con, err := newConsole(false, true, tc.stdinOnce, io.Discard, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			defer con.abort()
			con.write([]byte("early\n"), false, io.Discard)
			var first, second bytes.Buffer
			con.attach(&first, io.Discard)
			con.write([]byte("late\n"), false, io.Discard)
			con.attach(&second, io.Discard)
			if first.String() != tc.want {
				t.Errorf("first client got %q, want %q", first.String(), tc.want)
			}
			if second.String() != "" {
				t.Errorf("second client got %q, want nothing of what came before it", second.String())
			}
		})
	}
}

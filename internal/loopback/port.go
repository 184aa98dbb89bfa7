// Package loopback picks loopback addresses for the API servers that tests and
// benchmarks start beside each other on one machine.
package loopback

import (
	"fmt"
	"math/rand/v2"
	"net"
)

// FreePort returns a loopback address nobody listens on now. It is chosen below the
// kernel's ephemeral range (32768-60999 by default), so that no outgoing connection of
// another process takes the port between this check and the caller's bind, and below
// the NodePort range (30000-32767) that host publishers listen on.
func FreePort() (string, error) {
	var lastErr error
	for range 50 {
		addr := fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(10000))
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			ln.Close()
			return addr, nil
		}
		lastErr = err
	}
	return "", fmt.Errorf("no free loopback port in 20000-29999: %w", lastErr)
}

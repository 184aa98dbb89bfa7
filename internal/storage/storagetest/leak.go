package storagetest

import (
	"os"
	"runtime"
	"testing"
	"time"
)

// leakGrace is how long goroutines get to finish after the tests before they count as
// leaked: closing clients, watches and servers completes asynchronously.
const leakGrace = 5 * time.Second

// Main runs a package's tests (call it from TestMain) and fails the package when more
// goroutines run after them than before, printing every stack: a watch, client or server
// left running is a bug in the store or in the test.
func Main(m *testing.M) {
	before := runtime.NumGoroutine()
	code := m.Run()
	if code == 0 {
		deadline := time.Now().Add(leakGrace)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			os.Stderr.Write(buf[:runtime.Stack(buf, true)])
			os.Stderr.WriteString("FAIL: goroutines leaked by the tests (stacks above)\n")
			code = 1
		}
	}
	os.Exit(code)
}

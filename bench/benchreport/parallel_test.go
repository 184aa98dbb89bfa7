package benchreport

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// TestParallel: every index runs once across the clients; the first error stops the rest
// and is returned with the count of successes.
func TestParallel(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]int{}
	n, err := Parallel(context.Background(), []string{"a", "b", "c"}, 100, func(_ context.Context, _ string, i int) error {
		mu.Lock()
		seen[i]++
		mu.Unlock()
		return nil
	})
	if n != 100 || err != nil || len(seen) != 100 {
		t.Fatalf("Parallel = %d, %v; %d distinct indexes, want 100, nil, 100", n, err, len(seen))
	}
	for i, c := range seen {
		if c != 1 {
			t.Fatalf("index %d ran %d times", i, c)
		}
	}
	boom := errors.New("boom")
	n, err = Parallel(context.Background(), []int{1}, 10, func(_ context.Context, _ int, i int) error {
		if i == 3 {
			return boom
		}
		return nil
	})
	if n != 3 || !errors.Is(err, boom) {
		t.Fatalf("Parallel = %d, %v; want 3, boom", n, err)
	}
}

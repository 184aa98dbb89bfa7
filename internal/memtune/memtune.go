// Package memtune keeps the resident set of every tranche process near what its steady
// work needs: a lower GC percentage, the binary's file pages released after start-up,
// and freed memory returned after bursts of load.
package memtune

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
)

// defaultGCPercent is the GOGC every tranche process runs with unless GOGC is set in its
// environment. An idle control plane or node agent holds little live heap, so Go's
// default of 100 lets the heap (and the resident set) reach twice that before a cycle;
// 50 keeps about 14 MB less private memory in an idle `tranche server` for GC cycles
// that are twice as frequent, which its small, mostly idle heap makes cheap.
const defaultGCPercent = 50

// Tune applies the memory defaults of every tranche process: the GC percentage
// (unless GOGC is set) and the release of the binary's file pages (see
// releaseBinaryPages).
func Tune() error {
	if _, ok := os.LookupEnv("GOGC"); !ok {
		debug.SetGCPercent(defaultGCPercent)
	}
	return releaseBinaryPages()
}

// releaseBinaryPages unmaps the pages of the tranche binary's read-only mappings (code,
// read-only data, the tables the runtime reads for stack walks) and advises the kernel
// that they are read at random. Without it, the kernel maps up to 64 kB of neighbouring,
// already cached pages on every fault ("fault-around"), and package initialisation
// touches so many places of a 110 MB binary that nearly all of its 75 MB of loaded
// segments end up in each process's resident set. After it, a page is mapped only when
// it is used again, one at a time, so the resident set holds what the process runs. The
// pages stay in the page cache, shared by every tranche process, so a refault reads
// nothing from disk. Writable mappings (data, bss), and read-only ones with private
// changes, are left alone: MADV_DONTNEED would discard what was written.
func releaseBinaryPages() error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("release the binary's pages: %w", err)
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return fmt.Errorf("release the binary's pages: %w", err)
	}
	defer f.Close()
	ranges, err := readOnlyMappings(f, exe)
	if err != nil {
		return fmt.Errorf("release the binary's pages: %w", err)
	}
	for _, r := range ranges {
		for _, advice := range []uintptr{syscall.MADV_RANDOM, syscall.MADV_DONTNEED} {
			if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, r.start, r.end-r.start, advice); errno != 0 {
				return fmt.Errorf("release the binary's pages: madvise %#x-%#x: %w", r.start, r.end, errno)
			}
		}
	}
	return nil
}

// ReleaseWhenReady returns a channel for a component's ready signal; once it is closed,
// the binary's pages are released again, so the code that only ran during start-up
// (etcd's bootstrap, scheme and OpenAPI set-up, the first lists) leaves the resident set
// and an idle process keeps the pages its steady work uses. A failure is logged: it costs
// memory, never behaviour.
func ReleaseWhenReady(ctx context.Context, log *slog.Logger) chan<- struct{} {
	ready := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-ready:
			if err := releaseBinaryPages(); err != nil {
				log.Warn("after start-up", "err", err)
			}
			settleAfterBursts(ctx, log)
		}
	}()
	return ready
}

// mapping is one address range of a process's memory map, [start, end).
type mapping struct{ start, end uintptr }

// readOnlyMappings returns the private, non-writable mappings of the file at path listed
// in smaps (the format of /proc/PID/smaps) that hold only pages of the file. A mapping
// with anonymous pages (one the dynamic linker wrote relocations into before making it
// read-only, as in a PIE binary) is left out: dropping its pages would bring back the
// file's unrelocated bytes.
func readOnlyMappings(smaps io.Reader, path string) ([]mapping, error) {
	var out []mapping
	// cur is the mapping whose fields are being read, if it is a candidate.
	var cur *mapping
	keep := func() {
		if cur != nil {
			out = append(out, *cur)
			cur = nil
		}
	}
	sc := bufio.NewScanner(smaps)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		// Field lines ("Rss:       12 kB", "VmFlags: rd ex") have a key ending in ':'
		// as their first word; a header line starts with an address range.
		if key, rest, ok := strings.Cut(line, ":"); ok && !strings.ContainsAny(key, " -") {
			if key == "Anonymous" && cur != nil && strings.TrimSpace(rest) != "0 kB" {
				cur = nil
			}
			continue
		}
		keep()
		// start-end perms offset dev inode [path]; the path may hold spaces.
		fields := strings.SplitN(line, " ", 6)
		if len(fields) < 6 || strings.TrimLeft(fields[5], " ") != path {
			continue
		}
		perms := fields[1]
		if len(perms) != 4 || perms[1] == 'w' || perms[3] != 'p' {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			return nil, fmt.Errorf("smaps line %d: address range %q has no '-'", n, fields[0])
		}
		start, err := strconv.ParseUint(lo, 16, 64)
		if err != nil {
			return nil, fmt.Errorf("smaps line %d: start address: %w", n, err)
		}
		end, err := strconv.ParseUint(hi, 16, 64)
		if err != nil {
			return nil, fmt.Errorf("smaps line %d: end address: %w", n, err)
		}
		if end <= start {
			return nil, fmt.Errorf("smaps line %d: empty or inverted range %q", n, fields[0])
		}
		cur = &mapping{uintptr(start), uintptr(end)}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	keep()
	return out, nil
}

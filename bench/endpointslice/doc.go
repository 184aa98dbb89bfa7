// Package endpointslice holds the EndpointSlice controller's benchmark (`make
// bench-endpointslice`): the first sync of 1,000 Services of 100 pods each against the
// real API handler (wall time and API writes, beside the fewest writes possible), and the
// time from a pod's Ready status write to its slice showing it ready, beside a plain
// write-to-watch-event round trip on the same server. Every figure is printed next to
// its reference as a ratio; nothing in it is a timed assertion. See README.md.
package endpointslice

package benchcluster

import "testing"

// wrkReport is the shape of wrk 4.2's report (Debian's), with both error lines.
const wrkReport = `Running 4s test @ http://10.244.1.3:8080/hostname
  2 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     4.61ms    2.70ms  40.12ms   83.17%
    Req/Sec     3.55k   412.33     4.40k    72.50%
  28290 requests in 4.00s, 3.37MB read
  Socket errors: connect 0, read 0, write 0, timeout 3
  Non-2xx or 3xx responses: 12
Requests/sec:   7066.79
Transfer/sec:    861.57KB
`

func TestParseWrk(t *testing.T) {
	rps, errs, err := parseWrk([]byte(wrkReport))
	if err != nil || rps != 7066.79 || errs != "Socket errors: connect 0, read 0, write 0, timeout 3; Non-2xx or 3xx responses: 12" {
		t.Errorf("parseWrk = %v, %q, %v", rps, errs, err)
	}
	if _, _, err := parseWrk([]byte("unable to connect to 10.244.1.3:8080 Connection refused\n")); err == nil {
		t.Error("a report without Requests/sec parsed")
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 3}} {
		if got := Median(tc.in); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

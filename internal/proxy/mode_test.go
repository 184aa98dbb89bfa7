package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/knftables"
)

func TestParseMode(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "", want: ModeNFTables},
		{in: "nftables", want: ModeNFTables},
		{in: "iptables", want: ModeIPTables},
		{in: "ipvs", want: ModeIPVS},
		{in: "userspace", err: `--proxy-mode: Unsupported value: "userspace": supported values: "nftables", "iptables", "ipvs"`},
		{in: "IPVS", err: `--proxy-mode: Unsupported value: "IPVS": supported values: "nftables", "iptables", "ipvs"`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseMode(field.NewPath("--proxy-mode"), tc.in)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("ParseMode(%q) = %q, %v; want error %s", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseMode(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestParseIPVSScheduler(t *testing.T) {
	if got, err := ParseIPVSScheduler(field.NewPath("--ipvs-scheduler"), ""); err != nil || got != "rr" {
		t.Errorf(`"" = %q, %v; want rr`, got, err)
	}
	if got, err := ParseIPVSScheduler(field.NewPath("--ipvs-scheduler"), "wlc"); err != nil || got != "wlc" {
		t.Errorf(`wlc = %q, %v`, got, err)
	}
	_, err := ParseIPVSScheduler(field.NewPath("--ipvs-scheduler"), "random")
	if err == nil || !strings.HasPrefix(err.Error(), `--ipvs-scheduler: Unsupported value: "random": supported values: "rr", "wrr"`) {
		t.Errorf("random: %v", err)
	}
}

// fakeCleaners records which modes' rules were removed; nft is a fake holding the
// proxy's table with one chain.
type fakeCleaners struct {
	nft       *knftables.Fake
	iptCalled bool
	ipvsErr   error
	ipvsCalls int
}

func newFakeCleaners(t *testing.T) *fakeCleaners {
	t.Helper()
	nft := knftables.NewFake(knftables.IPv4Family, TableName)
	tx := nft.NewTransaction()
	tx.Add(&knftables.Table{})
	tx.Add(&knftables.Chain{Name: "services"})
	if err := nft.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	return &fakeCleaners{nft: nft, ipvsErr: errNotHere}
}

func (f *fakeCleaners) cleaners() modeCleaners {
	return modeCleaners{
		nft: func() (knftables.Interface, error) { return f.nft, nil },
		ipt: func() (IPTables, error) {
			f.iptCalled = true
			return nil, errNotHere
		},
		ipvs: func(context.Context) error {
			f.ipvsCalls++
			return f.ipvsErr
		},
	}
}

func TestCleanupOtherModes(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		mode                 string
		wantTable            bool
		wantIPT, wantIPVSRun bool
	}{
		{mode: ModeNFTables, wantTable: true, wantIPT: true, wantIPVSRun: true},
		{mode: ModeIPTables, wantTable: false, wantIPT: false, wantIPVSRun: true},
		{mode: ModeIPVS, wantTable: false, wantIPT: true, wantIPVSRun: false},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			f := newFakeCleaners(t)
			if err := cleanupOtherModes(ctx, tc.mode, f.cleaners(), log); err != nil {
				t.Fatal(err)
			}
			_, err := f.nft.List(ctx, "chains")
			if hasTable := err == nil; hasTable != tc.wantTable {
				t.Errorf("table ip %s there: %v (List: %v), want %v", TableName, hasTable, err, tc.wantTable)
			}
			if f.iptCalled != tc.wantIPT || (f.ipvsCalls == 1) != tc.wantIPVSRun {
				t.Errorf("iptables cleaner called %v, ipvs %d times; want %v, %v", f.iptCalled, f.ipvsCalls, tc.wantIPT, tc.wantIPVSRun)
			}
			// Again, with nothing left: still no error.
			if err := cleanupOtherModes(ctx, tc.mode, f.cleaners(), log); err != nil {
				t.Fatalf("second cleanup: %v", err)
			}
		})
	}
	t.Run("a failing cleanup is the error, the other modes are still cleaned", func(t *testing.T) {
		f := newFakeCleaners(t)
		f.ipvsErr = errors.New("netlink: permission denied")
		err := cleanupOtherModes(ctx, ModeIPTables, f.cleaners(), log)
		if err == nil || err.Error() != "removing the rules of proxy mode ipvs: netlink: permission denied" {
			t.Fatalf("err = %v", err)
		}
		if _, err := f.nft.List(ctx, "chains"); err == nil {
			t.Errorf("table ip %s left", TableName)
		}
	})
}

func TestProxyModeHandler(t *testing.T) {
	rec := httptest.NewRecorder()
	proxyModeHandler(ModeIPTables).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/proxyMode", nil))
	got := map[string]string{"code": http.StatusText(rec.Code), "type": rec.Header().Get("Content-Type"), "body": rec.Body.String()}
	want := map[string]string{"code": "OK", "type": "text/plain; charset=utf-8", "body": "iptables"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Error(diff)
	}
}

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

// fakeCleaners holds the rules of the three modes: nft a fake with the proxy's table,
// ipt a fake whose nat table has KUBE-SERVICES jumped to from PREROUTING; ipvs counts
// the cleanups of IPVS.
type fakeCleaners struct {
	nft       *knftables.Fake
	ipt       *FakeIPTables
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
	ipt := NewFakeIPTables()
	if err := ipt.Restore(context.Background(), []byte("*nat\n:KUBE-SERVICES - [0:0]\n-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\nCOMMIT\n")); err != nil {
		t.Fatal(err)
	}
	return &fakeCleaners{nft: nft, ipt: ipt}
}

// iptablesRules tells whether f's nat table still has a KUBE-* chain or a jump to one.
func (f *fakeCleaners) iptablesRules(t *testing.T) bool {
	t.Helper()
	nat, err := f.ipt.Save(context.Background(), "nat")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(nat), "KUBE-")
}

func (f *fakeCleaners) cleaners() modeCleaners {
	return modeCleaners{
		nft: func() (knftables.Interface, error) { return f.nft, nil },
		ipt: func() (IPTables, error) { return f.ipt, nil },
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
		mode                            string
		wantTable, wantIPT, wantIPVSRun bool
	}{
		{mode: ModeNFTables, wantTable: true, wantIPT: false, wantIPVSRun: true},
		{mode: ModeIPTables, wantTable: false, wantIPT: true, wantIPVSRun: true},
		{mode: ModeIPVS, wantTable: false, wantIPT: false, wantIPVSRun: false},
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
			if got := f.iptablesRules(t); got != tc.wantIPT {
				t.Errorf("KUBE-* iptables rules there: %v, want %v", got, tc.wantIPT)
			}
			if (f.ipvsCalls == 1) != tc.wantIPVSRun {
				t.Errorf("ipvs cleaned up %d times, want it %v", f.ipvsCalls, tc.wantIPVSRun)
			}
			// Again, with nothing left: still no error.
			if err := cleanupOtherModes(ctx, tc.mode, f.cleaners(), log); err != nil {
				t.Fatalf("second cleanup: %v", err)
			}
		})
	}
	t.Run("a mode whose tool is missing has nothing to clean", func(t *testing.T) {
		c := newFakeCleaners(t).cleaners()
		c.ipt = func() (IPTables, error) { return nil, errors.New("iptables-restore not found") }
		if err := cleanupOtherModes(ctx, ModeNFTables, c, log); err != nil {
			t.Fatal(err)
		}
	})
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

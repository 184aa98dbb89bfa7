package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os/exec"
	"slices"

	"github.com/moby/ipvs"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/knftables"
)

// ModeProxier is the proxier of one mode, as the Runner drives it: event handlers that
// only record changes, the node's zone, the sync loop and one sync. *Proxier (nftables),
// *IPTablesProxier and *IPVSProxier implement it.
type ModeProxier interface {
	OnServiceAdd(*v1.Service)
	OnServiceUpdate(old, cur *v1.Service)
	OnServiceDelete(*v1.Service)
	OnEndpointSliceAdd(*discoveryv1.EndpointSlice)
	OnEndpointSliceUpdate(old, cur *discoveryv1.EndpointSlice)
	OnEndpointSliceDelete(*discoveryv1.EndpointSlice)
	SetZone(string)
	Run(ctx context.Context)
	Sync(ctx context.Context) error
}

var _ ModeProxier = (*Proxier)(nil)

// The proxy modes, named as kube-proxy's --proxy-mode values. nftables is tranche's
// default (see README.md "Proxy modes"): kube-proxy's newest mode, whose rule count per
// packet does not grow with the number of Services.
const (
	ModeNFTables = "nftables"
	ModeIPTables = "iptables"
	ModeIPVS     = "ipvs"
)

// Modes returns the proxy modes, the default first.
func Modes() []string { return []string{ModeNFTables, ModeIPTables, ModeIPVS} }

// ParseMode returns the mode s names, "" meaning ModeNFTables. An unknown mode is a
// field.ErrorTypeNotSupported at fld listing the three.
func ParseMode(fld *field.Path, s string) (string, error) {
	if s == "" {
		return ModeNFTables, nil
	}
	if !slices.Contains(Modes(), s) {
		return "", field.NotSupported(fld, s, Modes())
	}
	return s, nil
}

// DefaultIPVSScheduler is kube-proxy's --ipvs-scheduler default: round robin.
const DefaultIPVSScheduler = "rr"

// ParseIPVSScheduler returns the scheduler s names, "" meaning DefaultIPVSScheduler.
func ParseIPVSScheduler(fld *field.Path, s string) (string, error) {
	if s == "" {
		return DefaultIPVSScheduler, nil
	}
	if !slices.Contains(IPVSSchedulers, s) {
		return "", field.NotSupported(fld, s, IPVSSchedulers)
	}
	return s, nil
}

// checkMode fails, naming the missing Debian package or kernel module, when cfg's
// mode (already parsed) cannot run here, and fills in the kernel handles cfg lacks.
func checkMode(cfg *RunConfig) error {
	switch cfg.Mode {
	case ModeNFTables:
		if cfg.NFT != nil {
			return nil
		}
		if _, err := exec.LookPath("nft"); err != nil {
			return fmt.Errorf("the nft command is missing (%w): install Debian's nftables package", err)
		}
		nft, err := NewKernel()
		if err != nil {
			return err
		}
		cfg.NFT = nft
	case ModeIPTables:
		if cfg.IPTables != nil {
			return nil
		}
		ipt, err := NewIPTablesKernel()
		if err != nil {
			return err
		}
		cfg.IPTables = ipt
	case ModeIPVS:
		sched, err := ParseIPVSScheduler(field.NewPath("ipvs", "scheduler"), cfg.IPVSScheduler)
		if err != nil {
			return err
		}
		cfg.IPVSScheduler = sched
		if cfg.IPVS != nil {
			return nil
		}
		if err := IPVSSupported(); err != nil {
			return err
		}
		h, err := ipvs.New("")
		if err != nil {
			return fmt.Errorf("opening an IPVS handle: %w", err)
		}
		cfg.IPVS = h
	}
	return nil
}

// newModeProxier builds the proxier of cfg's mode (checked by checkMode).
func newModeProxier(cfg RunConfig, pc ProxierConfig) (ModeProxier, error) {
	switch cfg.Mode {
	case ModeIPTables:
		return NewIPTablesProxier(cfg.IPTables, pc)
	case ModeIPVS:
		var addrs []netip.Addr
		if cfg.NodeIP.IsValid() {
			addrs = append(addrs, cfg.NodeIP)
		}
		return NewIPVSProxier(cfg.IPVS, pc, IPVSOptions{Scheduler: cfg.IPVSScheduler, NodeAddresses: addrs})
	}
	return NewProxier(cfg.NFT, pc)
}

// modeCleaners reach the rules of each mode in the node's network namespace; nft and
// ipt fail with errNotHere when their tool is missing (the mode cannot have left
// anything there), ipvs removes what the ipvs mode leaves with the tools there are.
type modeCleaners struct {
	nft  func() (knftables.Interface, error)
	ipt  func() (IPTables, error)
	ipvs func(ctx context.Context) error
}

// errNotHere says that a mode cannot have rules on this node.
var errNotHere = errors.New("mode not available on this node")

// cleanupOtherModes removes what the modes other than mode left on the node, as
// kube-proxy does at start (and `kube-proxy --cleanup` for every mode): nftables'
// table ip TableName, iptables' KUBE-* chains and the jumps into them, ipvs' virtual
// servers. A proxy switched to another mode thus leaves no rule of the old one to
// catch packets before the new rules. Every mode is tried; the errors are joined.
func cleanupOtherModes(ctx context.Context, mode string, c modeCleaners, log *slog.Logger) error {
	var errs []error
	note := func(other string, err error) {
		switch {
		case errors.Is(err, errNotHere):
			log.Debug("proxy mode not available: nothing of it to remove", "mode", other, "err", err)
		case err != nil:
			errs = append(errs, fmt.Errorf("removing the rules of proxy mode %s: %w", other, err))
		default:
			log.Info("removed the rules of another proxy mode", "mode", other)
		}
	}
	if mode != ModeNFTables {
		note(ModeNFTables, func() error {
			nft, err := c.nft()
			if err != nil {
				return fmt.Errorf("%w: %v", errNotHere, err)
			}
			return deleteTable(ctx, nft)
		}())
	}
	if mode != ModeIPTables {
		note(ModeIPTables, func() error {
			ipt, err := c.ipt()
			if err != nil {
				return fmt.Errorf("%w: %v", errNotHere, err)
			}
			return CleanupIPTables(ctx, ipt)
		}())
	}
	if mode != ModeIPVS {
		note(ModeIPVS, c.ipvs(ctx))
	}
	return errors.Join(errs...)
}

// deleteTable deletes nft's table, if it exists: adding it first makes the deletion
// valid either way, in one transaction (kube-proxy's nftables cleanup does the same).
func deleteTable(ctx context.Context, nft knftables.Interface) error {
	tx := nft.NewTransaction()
	tx.Add(&knftables.Table{})
	tx.Delete(&knftables.Table{})
	return nft.Run(ctx, tx)
}

// kernelCleaners reach the node's kernel: nft, iptables-restore/-save, and IPVS with
// the ipvs mode's device, ipsets and iptables rules.
func kernelCleaners(nft knftables.Interface, ipt IPTables) modeCleaners {
	return modeCleaners{
		nft: func() (knftables.Interface, error) {
			if nft != nil {
				return nft, nil
			}
			return NewKernel()
		},
		ipt: func() (IPTables, error) {
			if ipt != nil {
				return ipt, nil
			}
			return NewIPTablesKernel()
		},
		// Without IP_VS, CleanupIPVS still removes the mode's device, iptables rules
		// and ipsets, with whichever of the tools are installed.
		ipvs: CleanupIPVS,
	}
}

// proxyModeHandler answers GET /proxyMode with the mode as a plain-text body, as
// kube-proxy's metrics server does.
func proxyModeHandler(mode string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		fmt.Fprint(w, mode)
	})
}

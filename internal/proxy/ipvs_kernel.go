package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"

	"github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
)

// procIPVS exists when the network namespace's kernel has IP_VS loaded.
const procIPVS = "/proc/net/ip_vs"

// IPVSSupported returns nil when the kernel has IP_VS, else an error naming the
// kernel module ip_vs and how its absence was detected: /proc/net/ip_vs is missing
// and the generic netlink family "IPVS" (which moby/ipvs asks for when it opens a
// handle) is unknown. It only reads.
func IPVSSupported() error {
	return ipvsSupported(procIPVS, func() error { _, err := netlink.GenlFamilyGet("IPVS"); return err })
}

func ipvsSupported(proc string, family func() error) error {
	_, statErr := os.Stat(proc)
	if statErr == nil {
		return nil
	}
	famErr := family()
	if famErr == nil {
		return nil
	}
	return fmt.Errorf("the ipvs proxy mode needs the kernel's IP Virtual Server, kernel module ip_vs (CONFIG_IP_VS), which this kernel lacks: %s does not exist and the generic netlink family \"IPVS\" is unknown (%v); load it with `modprobe ip_vs` on a kernel that has it, or use the nftables or iptables proxy mode", proc, famErr)
}

// CleanupIPVS removes what the ipvs mode leaves in the calling goroutine's network
// namespace (the caller runs it inside the node's): every virtual server when the
// kernel has IP_VS, the device kube-ipvs0, and the mode's iptables jumps, KUBE-*
// chains and ipsets. What is already gone is no error.
//
// On a kernel without IP_VS and without kube-ipvs0 there is nothing to remove: the ipvs
// mode refuses to start there before it writes anything, so the iptables and ipset
// calls (dozens of execs, on every agent start in the other modes) are skipped.
func CleanupIPVS(ctx context.Context) error {
	supported := IPVSSupported() == nil
	if !supported {
		if l, err := (netlinkIPVSDevice{}).link(); err == nil && l == nil {
			return nil
		}
	}
	var h IPVSHandle
	if supported {
		hh, err := ipvs.New("")
		if err != nil {
			return fmt.Errorf("opening an IPVS handle: %w", err)
		}
		defer hh.Close()
		h = hh
	}
	return cleanupIPVS(ctx, h, NewIPVSDevice(), NewIPVSRuleWriter())
}

func cleanupIPVS(ctx context.Context, h IPVSHandle, dev IPVSDevice, rules IPVSRuleWriter) error {
	var errs []error
	if h != nil {
		if err := h.Flush(); err != nil {
			errs = append(errs, fmt.Errorf("flushing virtual servers: %w", err))
		}
	}
	if err := dev.Delete(); err != nil {
		errs = append(errs, fmt.Errorf("deleting %s: %w", IPVSDeviceName, err))
	}
	if err := rules.Cleanup(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// NewIPVSDevice returns the kube-ipvs0 of the calling goroutine's network namespace,
// through netlink.
func NewIPVSDevice() IPVSDevice { return netlinkIPVSDevice{} }

type netlinkIPVSDevice struct{}

func (netlinkIPVSDevice) link() (netlink.Link, error) {
	l, err := netlink.LinkByName(IPVSDeviceName)
	if _, notFound := err.(netlink.LinkNotFoundError); notFound {
		return nil, nil
	}
	return l, err
}

func (d netlinkIPVSDevice) Ensure() error {
	l, err := d.link()
	if err != nil || l != nil {
		return err
	}
	return netlink.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: IPVSDeviceName}})
}

func (d netlinkIPVSDevice) Addresses() ([]netip.Addr, error) {
	l, err := d.link()
	if err != nil || l == nil {
		return nil, err
	}
	as, err := netlink.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(as))
	for _, a := range as {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			out = append(out, ip.Unmap())
		}
	}
	return out, nil
}

func (d netlinkIPVSDevice) addr(a netip.Addr) (netlink.Link, *netlink.Addr, error) {
	l, err := d.link()
	if err == nil && l == nil {
		err = fmt.Errorf("no device %s", IPVSDeviceName)
	}
	return l, &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(32, 32)}}, err
}

func (d netlinkIPVSDevice) AddAddress(a netip.Addr) error {
	l, na, err := d.addr(a)
	if err != nil {
		return err
	}
	return netlink.AddrAdd(l, na)
}

func (d netlinkIPVSDevice) DelAddress(a netip.Addr) error {
	l, na, err := d.addr(a)
	if err != nil {
		return err
	}
	return netlink.AddrDel(l, na)
}

func (d netlinkIPVSDevice) Delete() error {
	l, err := d.link()
	if err != nil || l == nil {
		return err
	}
	return netlink.LinkDel(l)
}

// NewIPVSRuleWriter returns the IPVSRuleWriter that runs Debian's ipset and iptables
// commands in the calling process's network namespace.
func NewIPVSRuleWriter() IPVSRuleWriter { return ipvsExecRules{} }

type ipvsExecRules struct{}

func ipvsRunTool(ctx context.Context, pkg string, stdin string, name string, args ...string) error {
	path, err := exec.LookPath(name)
	if err != nil {
		return fmt.Errorf("%s not found (Debian package %s): %w", name, pkg, err)
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

func (ipvsExecRules) RestoreIPSets(ctx context.Context, text string) error {
	return ipvsRunTool(ctx, "ipset", text, "ipset", "-exist", "restore")
}

func ipvsJumpArgs(j IPVSJump, verb string, pos ...string) []string {
	args := append([]string{"-w", "-t", j.Table, verb, j.Chain}, pos...)
	return append(args, "-m", "comment", "--comment", j.Comment, "-j", j.Target)
}

func (ipvsExecRules) RestoreIPTables(ctx context.Context, text string, jumps []IPVSJump) error {
	if err := ipvsRunTool(ctx, "iptables", text, "iptables-restore", "-w", "--noflush"); err != nil {
		return err
	}
	for _, j := range jumps {
		if ipvsRunTool(ctx, "iptables", "", "iptables", ipvsJumpArgs(j, "-C")...) == nil {
			continue
		}
		if err := ipvsRunTool(ctx, "iptables", "", "iptables", ipvsJumpArgs(j, "-I", "1")...); err != nil {
			return err
		}
	}
	return nil
}

func (ipvsExecRules) Cleanup(ctx context.Context) error {
	if _, err := exec.LookPath("iptables"); err == nil {
		jumps, flush, del := ipvsCleanupPlan()
		for _, j := range jumps {
			for ipvsRunTool(ctx, "iptables", "", "iptables", ipvsJumpArgs(j, "-D")...) == nil {
			}
		}
		for _, c := range flush {
			_ = ipvsRunTool(ctx, "iptables", "", "iptables", "-w", "-t", c[0], "-F", c[1]) // a missing chain is fine
		}
		for _, c := range del {
			_ = ipvsRunTool(ctx, "iptables", "", "iptables", "-w", "-t", c[0], "-X", c[1])
		}
	}
	if _, err := exec.LookPath("ipset"); err == nil {
		for _, s := range ipvsIPSets {
			_ = ipvsRunTool(ctx, "ipset", "", "ipset", "destroy", s.name) // a missing set is fine
		}
	}
	return nil
}

// ipvsSharedChains are the chains the iptables mode uses too, under the same names.
var ipvsSharedChains = map[[2]string]bool{
	{"nat", "KUBE-SERVICES"}: true, {"nat", "KUBE-POSTROUTING"}: true, {"nat", "KUBE-MARK-MASQ"}: true,
	{"filter", "KUBE-FORWARD"}: true, {"filter", "KUBE-PROXY-FIREWALL"}: true,
}

// ipvsCleanupPlan returns what Cleanup removes: the jumps into the chains only this
// mode uses; every chain it declares flushed, so that none refers to its ipsets or
// chains any more; and the chains only it uses deleted. The chains it shares with the
// iptables mode are left empty with their jumps, for that mode to rewrite (or for
// CleanupIPTables to delete), so that cleaning up the ipvs mode before the iptables
// mode starts never takes the iptables mode's jumps away.
func ipvsCleanupPlan() (jumps []IPVSJump, flush, del [][2]string) {
	for _, j := range ipvsJumps {
		if !ipvsSharedChains[[2]string{j.Table, j.Target}] {
			jumps = append(jumps, j)
		}
	}
	flush = ipvsChains(ipvsIPTablesText(Config{}))
	for _, c := range flush {
		if !ipvsSharedChains[c] {
			del = append(del, c)
		}
	}
	return jumps, flush, del
}

// ipvsChains lists the (table, chain) pairs an iptables-restore text declares.
func ipvsChains(text string) [][2]string {
	var out [][2]string
	table := ""
	for _, l := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(l, "*"):
			table = l[1:]
		case strings.HasPrefix(l, ":"):
			out = append(out, [2]string{table, strings.Fields(l[1:])[0]})
		}
	}
	return out
}

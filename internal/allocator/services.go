// Package allocator hands out Service ClusterIPs and NodePorts. Each allocation is a key
// in the store written in the same transaction as the Service (apiserver.Admitter), so
// two Services can never hold the same address, a failed create leaks nothing, and a
// delete frees what the Service held. A ClusterIP is also published as the
// networking.k8s.io/v1 IPAddress object kube-apiserver's allocator makes for it (named
// by the address, parentRef the Service), written in that same transaction.
package allocator

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/apiserver"
	"github.com/tranche/tranche/internal/registry/core"
	"github.com/tranche/tranche/internal/storage"
)

// Key prefixes of allocations in the store, and of the IPAddress objects.
const (
	IPPrefix        = "/registry/ranges/serviceips/"
	PortPrefix      = "/registry/ranges/servicenodeports/"
	IPAddressPrefix = "/registry/networking.k8s.io/ipaddresses/"
	// ServiceCIDRPrefix is where the API server keeps ServiceCIDR objects.
	ServiceCIDRPrefix = "/registry/networking.k8s.io/servicecidrs/"
)

// ManagedBy is the managed-by label value of the IPAddress objects the allocator
// writes, kube-apiserver's allocator's name.
const ManagedBy = "ipallocator.k8s.io"

// servicesGVR is the resource the allocator admits (schema.GroupVersionResource.String()).
var servicesGVR = schema.GroupVersionResource{Version: "v1", Resource: "services"}.String()

var serviceGK = schema.GroupKind{Kind: "Service"}

// PortRange is an inclusive range of node ports.
type PortRange struct{ First, Last int }

// ParsePortRange parses "30000-32767".
func ParsePortRange(s string) (PortRange, error) {
	a, b, ok := strings.Cut(s, "-")
	first, err1 := strconv.Atoi(strings.TrimSpace(a))
	last, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil || first < 1 || last > 65535 || first > last {
		return PortRange{}, fmt.Errorf("invalid port range %q: want FIRST-LAST within 1-65535", s)
	}
	return PortRange{first, last}, nil
}

func (r PortRange) String() string        { return fmt.Sprintf("%d-%d", r.First, r.Last) }
func (r PortRange) contains(p int32) bool { return int(p) >= r.First && int(p) <= r.Last }
func (r PortRange) size() int             { return r.Last - r.First + 1 }

// Services allocates ClusterIPs from CIDR and NodePorts from Ports.
type Services struct {
	CIDR  netip.Prefix
	Ports PortRange
	// Reserved addresses are never chosen at random (the DNS service's 10.96.0.10);
	// they can still be asked for explicitly.
	Reserved []netip.Addr
	Store    storage.Interface
	// Now stamps the IPAddress objects' creationTimestamp (time.Now when nil).
	Now func() time.Time
}

var _ apiserver.Admitter = (*Services)(nil)

// owner is what an allocation key holds: the Service that owns it.
type owner struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

func ownerValue(svc *v1.Service) []byte {
	data, _ := json.Marshal(owner{svc.Namespace, svc.Name, string(svc.UID)})
	return data
}

func ipKey(ip string) string { return IPPrefix + ip }

// ipAddressObject is the IPAddress that publishes svc's ClusterIP ip, encoded as the API
// server stores it, with the labels and parentRef kube-apiserver's allocator gives it.
func ipAddressObject(svc *v1.Service, ip string, now time.Time) ([]byte, error) {
	family := v1.IPv4Protocol
	if addr, err := netip.ParseAddr(ip); err == nil && addr.Is6() {
		family = v1.IPv6Protocol
	}
	obj := &networkingv1.IPAddress{
		TypeMeta: metav1.TypeMeta{APIVersion: networkingv1.SchemeGroupVersion.String(), Kind: "IPAddress"},
		ObjectMeta: metav1.ObjectMeta{
			Name: ip, UID: uuid.NewUUID(), CreationTimestamp: metav1.NewTime(now), Generation: 1,
			Labels: map[string]string{networkingv1.LabelIPAddressFamily: string(family), networkingv1.LabelManagedBy: ManagedBy},
		},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Namespace: svc.Namespace, Name: svc.Name}},
	}
	return apiserver.EncodeStored(obj)
}

// ipOps adds to ops the IPAddress writes that go with allocation key changes: an object
// for each newly held ClusterIP (refused, as the allocation, when one exists), and the
// deletion of each freed one's.
func (a *Services) ipOps(ops []storage.Op, svc *v1.Service, added, freed []string) ([]storage.Op, error) {
	for _, k := range added {
		if ip, ok := strings.CutPrefix(k, IPPrefix); ok {
			data, err := ipAddressObject(svc, ip, a.now())
			if err != nil {
				return nil, err
			}
			ops = append(ops, storage.Op{Key: IPAddressPrefix + ip, Value: data, MustNotExist: true})
		}
	}
	for _, k := range freed {
		if ip, ok := strings.CutPrefix(k, IPPrefix); ok {
			ops = append(ops, storage.Op{Key: IPAddressPrefix + ip, Delete: true})
		}
	}
	return ops, nil
}

func (a *Services) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}
func portKey(p int32) string { return PortPrefix + strconv.Itoa(int(p)) }

// held returns the allocation keys svc holds (or, for a new object, asks for).
func held(svc *v1.Service) map[string]bool {
	keys := map[string]bool{}
	if svc == nil {
		return keys
	}
	if svc.Spec.Type != v1.ServiceTypeExternalName {
		for _, ip := range svc.Spec.ClusterIPs {
			if ip != "" && ip != v1.ClusterIPNone {
				keys[ipKey(ip)] = true
			}
		}
		if len(svc.Spec.ClusterIPs) == 0 && svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != v1.ClusterIPNone {
			keys[ipKey(svc.Spec.ClusterIP)] = true
		}
	}
	for _, p := range svc.Spec.Ports {
		if p.NodePort != 0 {
			keys[portKey(p.NodePort)] = true
		}
	}
	if svc.Spec.HealthCheckNodePort != 0 {
		keys[portKey(svc.Spec.HealthCheckNodePort)] = true
	}
	return keys
}

// Admit fills in the ClusterIP and NodePorts a Service needs and returns the writes
// that record what it newly holds and free what it gave up.
func (a *Services) Admit(ctx context.Context, op apiserver.AdmitOp, gvr string, obj, old runtime.Object, dry bool) ([]storage.Op, error) {
	if gvr != servicesGVR {
		return nil, nil
	}
	svc := obj.(*v1.Service)
	var prev *v1.Service
	if old != nil {
		prev = old.(*v1.Service)
	}
	before := held(prev)
	used, err := a.usedKeys(ctx)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	// What this Service already holds is not "used by another".
	for k := range before {
		delete(used, k)
	}
	var errs field.ErrorList
	if core.ServiceNeedsClusterIP(svc) {
		ranges, err := a.serviceRanges(ctx)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		errs = append(errs, a.assignClusterIP(svc, ranges, used)...)
	}
	if core.ServiceNeedsNodePorts(svc) {
		errs = append(errs, a.assignNodePorts(svc, prev, used)...)
	} else {
		for i := range svc.Spec.Ports {
			if svc.Spec.Ports[i].NodePort != 0 && svc.Spec.Type != v1.ServiceTypeNodePort && svc.Spec.Type != v1.ServiceTypeLoadBalancer {
				svc.Spec.Ports[i].NodePort = 0
			}
		}
	}
	if core.ServiceNeedsHealthCheckNodePort(svc) {
		errs = append(errs, a.assignHealthCheckPort(svc, prev, used)...)
	} else {
		svc.Spec.HealthCheckNodePort = 0
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(serviceGK, svc.Name, errs)
	}
	after := held(svc)
	var ops []storage.Op
	var added, freed []string
	for k := range after {
		if !before[k] {
			ops = append(ops, storage.Op{Key: k, Value: ownerValue(svc), MustNotExist: true})
			added = append(added, k)
		}
	}
	for k := range before {
		if !after[k] {
			ops = append(ops, storage.Op{Key: k, Delete: true})
			freed = append(freed, k)
		}
	}
	ops, err = a.ipOps(ops, svc, added, freed)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return ops, nil
}

// Release frees everything a deleted Service held.
func (a *Services) Release(_ context.Context, gvr string, obj runtime.Object) []storage.Op {
	if gvr != servicesGVR {
		return nil
	}
	var ops []storage.Op
	for k := range held(obj.(*v1.Service)) {
		ops = append(ops, storage.Op{Key: k, Delete: true})
		if ip, ok := strings.CutPrefix(k, IPPrefix); ok {
			ops = append(ops, storage.Op{Key: IPAddressPrefix + ip, Delete: true})
		}
	}
	return ops
}

// ExplainConflict words a lost race on an allocation key as Kubernetes words a taken one.
func (a *Services) ExplainConflict(gvr, key, name string) error {
	if gvr != servicesGVR {
		return nil
	}
	switch {
	case strings.HasPrefix(key, IPPrefix), strings.HasPrefix(key, IPAddressPrefix):
		ip := key[strings.LastIndexByte(key, '/')+1:]
		return apierrors.NewInvalid(serviceGK, name, field.ErrorList{field.Invalid(field.NewPath("spec", "clusterIPs"), []string{ip},
			fmt.Sprintf("failed to allocate IP %s: provided IP is already allocated", ip))})
	case strings.HasPrefix(key, PortPrefix):
		p, _ := strconv.Atoi(strings.TrimPrefix(key, PortPrefix))
		return apierrors.NewInvalid(serviceGK, name, field.ErrorList{field.Invalid(field.NewPath("spec", "ports").Index(0).Child("nodePort"), p, "provided port is already allocated")})
	}
	return nil
}

// usedKeys lists every allocation key in the store.
func (a *Services) usedKeys(ctx context.Context) (map[string]bool, error) {
	used := map[string]bool{}
	for _, prefix := range []string{IPPrefix, PortPrefix} {
		res, err := a.Store.List(ctx, prefix, storage.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing allocations: %w", err)
		}
		for _, kv := range res.Items {
			used[kv.Key] = true
		}
	}
	// An IPAddress object someone made for an address also takes it, as in kube-apiserver.
	res, err := a.Store.List(ctx, IPAddressPrefix, storage.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing IPAddress objects: %w", err)
	}
	for _, kv := range res.Items {
		used[ipKey(strings.TrimPrefix(kv.Key, IPAddressPrefix))] = true
	}
	return used, nil
}

// serviceRanges returns the ranges ClusterIPs come from: the cluster's service CIDR
// first, then those of the other ServiceCIDR objects of its family that are not being
// deleted, by name (as kube-apiserver's allocator takes addresses from every
// ServiceCIDR once the default one is full).
func (a *Services) serviceRanges(ctx context.Context) ([]netip.Prefix, error) {
	ranges := []netip.Prefix{a.CIDR.Masked()}
	res, err := a.Store.List(ctx, ServiceCIDRPrefix, storage.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing ServiceCIDRs: %w", err)
	}
	for _, kv := range res.Items {
		var sc networkingv1.ServiceCIDR
		if err := apiserver.DecodeStored(kv.Value, &sc); err != nil || sc.DeletionTimestamp != nil {
			continue
		}
		for _, c := range sc.Spec.CIDRs {
			p, err := netip.ParsePrefix(c)
			if err != nil || p.Addr().Is4() != a.CIDR.Addr().Is4() || slices.Contains(ranges, p.Masked()) {
				continue
			}
			ranges = append(ranges, p.Masked())
		}
	}
	return ranges, nil
}

func rangesString(ranges []netip.Prefix) string {
	out := make([]string, len(ranges))
	for i, r := range ranges {
		out[i] = r.String()
	}
	return strings.Join(out, ", ")
}

func (a *Services) assignClusterIP(svc *v1.Service, ranges []netip.Prefix, used map[string]bool) field.ErrorList {
	path := field.NewPath("spec", "clusterIPs")
	if svc.Spec.ClusterIP == "" && len(svc.Spec.ClusterIPs) > 0 {
		svc.Spec.ClusterIP = svc.Spec.ClusterIPs[0]
	}
	if ip := svc.Spec.ClusterIP; ip != "" {
		addr, err := netip.ParseAddr(ip)
		switch {
		case err != nil:
			return field.ErrorList{field.Invalid(path, []string{ip}, fmt.Sprintf("failed to allocate IP %s: not a valid IP address", ip))}
		case !slices.ContainsFunc(ranges, func(r netip.Prefix) bool { return r.Contains(addr) }):
			// kube-apiserver says only "the provided network does not match the current
			// range"; naming the ranges tells the user what would be accepted.
			return field.ErrorList{field.Invalid(path, []string{ip}, fmt.Sprintf("failed to allocate IP %s: the provided IP (%s) is not in the valid range. The range of valid IPs is %s", ip, ip, rangesString(ranges)))}
		case used[ipKey(ip)]:
			return field.ErrorList{field.Invalid(path, []string{ip}, fmt.Sprintf("failed to allocate IP %s: provided IP is already allocated", ip))}
		}
		svc.Spec.ClusterIPs = []string{ip}
		return nil
	}
	for i, r := range ranges {
		if ip, ok := a.randomIP(r, i == 0, used); ok {
			svc.Spec.ClusterIP = ip
			svc.Spec.ClusterIPs = []string{ip}
			return nil
		}
	}
	// kube-apiserver answers a full range with a 500; it is the request that cannot be
	// met, so it is refused as invalid, naming the ranges.
	return field.ErrorList{field.Invalid(path, []string{""}, fmt.Sprintf("failed to allocate a serviceIP: range is full (%s)", rangesString(ranges)))}
}

// randomIP picks a free address of cidr, never the network or broadcast address or a
// reserved one, nor, in the cluster's own range (first), its first host (the
// kubernetes Service's).
//
// As kube-apiserver's (KEP-3070, the static subrange), it takes an address of the
// range's lower band (staticIPBand addresses after the network address) only once the
// rest is full, so an address a manifest names there (the DNS Service's .10) is rarely
// taken by a Service that asked for any.
func (a *Services) randomIP(cidr netip.Prefix, first bool, used map[string]bool) (string, bool) {
	base := cidr.Masked().Addr()
	bits := cidr.Addr().BitLen() - cidr.Bits()
	if bits > 30 {
		bits = 30
	}
	size := 1 << bits
	skip := map[string]bool{}
	for _, r := range a.Reserved {
		skip[r.String()] = true
	}
	// Offsets up to the band are the network address and the band after it.
	off, ok := upperBandFirst(size, staticIPBand(size)+1, func(off int) bool {
		if off == 0 || (off == 1 && first) || off == size-1 {
			return false
		}
		s := offsetAddr(base, off).String()
		return !used[ipKey(s)] && !skip[s]
	})
	if !ok {
		return "", false
	}
	return offsetAddr(base, off).String(), true
}

// upperBandFirst returns a random offset in [0, n) that free accepts: one of the upper
// band [band, n) while any is free there, else one of [0, band).
func upperBandFirst(n, band int, free func(off int) bool) (int, bool) {
	for _, span := range [][2]int{{band, n}, {0, band}} {
		size := span[1] - span[0]
		if size <= 0 {
			continue
		}
		start := rand.IntN(size)
		for i := range size {
			if off := span[0] + (start+i)%size; free(off) {
				return off, true
			}
		}
	}
	return 0, false
}

// staticIPBand is the size of the lower band of a service range of size addresses that
// dynamic allocation leaves for explicit addresses until the rest is full: size/16, at
// least 16 and at most 256, none in a range of 16 addresses or fewer (kube-apiserver's
// ipallocator).
func staticIPBand(size int) int {
	if size <= 16 {
		return 0
	}
	return min(max(size/16, 16), 256)
}

func offsetAddr(base netip.Addr, off int) netip.Addr {
	b := base.As16()
	carry := off
	for i := 15; i >= 0 && carry > 0; i-- {
		sum := int(b[i]) + carry&0xff
		b[i] = byte(sum)
		carry = carry>>8 + sum>>8
	}
	out := netip.AddrFrom16(b)
	if base.Is4() {
		return out.Unmap()
	}
	return out
}

func (a *Services) assignNodePorts(svc, prev *v1.Service, used map[string]bool) field.ErrorList {
	var errs field.ErrorList
	mine := map[int32]bool{}
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		path := field.NewPath("spec", "ports").Index(i).Child("nodePort")
		if p.NodePort == 0 && prev != nil {
			// An update that left nodePort out keeps the one the port had.
			for _, op := range prev.Spec.Ports {
				if op.NodePort != 0 && op.Port == p.Port && op.Protocol == p.Protocol {
					p.NodePort = op.NodePort
				}
			}
		}
		if p.NodePort != 0 {
			switch {
			case !a.Ports.contains(p.NodePort):
				errs = append(errs, field.Invalid(path, p.NodePort, fmt.Sprintf("provided port is not in the valid range. The range of valid ports is %s", a.Ports)))
			case used[portKey(p.NodePort)]:
				errs = append(errs, field.Invalid(path, p.NodePort, "provided port is already allocated"))
			}
			mine[p.NodePort] = true
			continue
		}
		port, ok := a.randomPort(used, mine)
		if !ok {
			errs = append(errs, field.Invalid(path, p.NodePort, fmt.Sprintf("failed to allocate a nodePort: range is full (%s)", a.Ports)))
			continue
		}
		p.NodePort = port
		mine[port] = true
	}
	return errs
}

func (a *Services) assignHealthCheckPort(svc, prev *v1.Service, used map[string]bool) field.ErrorList {
	path := field.NewPath("spec", "healthCheckNodePort")
	if svc.Spec.HealthCheckNodePort == 0 && prev != nil {
		svc.Spec.HealthCheckNodePort = prev.Spec.HealthCheckNodePort
	}
	mine := map[int32]bool{}
	for _, p := range svc.Spec.Ports {
		mine[p.NodePort] = true
	}
	if hc := svc.Spec.HealthCheckNodePort; hc != 0 {
		switch {
		case !a.Ports.contains(hc):
			return field.ErrorList{field.Invalid(path, hc, fmt.Sprintf("provided port is not in the valid range. The range of valid ports is %s", a.Ports))}
		case used[portKey(hc)] || mine[hc]:
			return field.ErrorList{field.Invalid(path, hc, "provided port is already allocated")}
		}
		return nil
	}
	port, ok := a.randomPort(used, mine)
	if !ok {
		return field.ErrorList{field.Invalid(path, 0, fmt.Sprintf("failed to allocate a nodePort: range is full (%s)", a.Ports))}
	}
	svc.Spec.HealthCheckNodePort = port
	return nil
}

// randomPort picks a free port of the range, neither used nor in mine.
//
// As kube-apiserver's (KEP-3668, the static subrange), it takes a port of the range's
// lower band (staticPortBand ports) only once the upper band is full, so a port a
// manifest names in the lower band is rarely taken by a Service that asked for any.
func (a *Services) randomPort(used map[string]bool, mine map[int32]bool) (int32, bool) {
	n := a.Ports.size()
	off, ok := upperBandFirst(n, staticPortBand(n), func(off int) bool {
		p := int32(a.Ports.First + off)
		return !used[portKey(p)] && !mine[p]
	})
	if !ok {
		return 0, false
	}
	return int32(a.Ports.First + off), true
}

// staticPortBand is the size of the lower band of a NodePort range of n ports that
// dynamic allocation leaves for explicit ports until the rest is full: n/32, at least 16
// and at most 128, none under 16 ports (kube-apiserver's portallocator).
func staticPortBand(n int) int {
	if n < 16 {
		return 0
	}
	return min(max(n/32, 16), 128)
}

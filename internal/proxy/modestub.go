package proxy

// Stand-ins for the iptables and ipvs proxiers of the ipt and ipvs branches (issue 18),
// with their agreed signatures, until those branches are merged; this file is deleted
// then.

import (
	"context"
	"errors"
)

type IPTables interface{}

type IPTablesProxier struct{ ModeProxier }

func NewIPTablesKernel() (IPTables, error) { return nil, errors.New("iptables: not merged yet") }

func NewIPTablesProxier(IPTables, ProxierConfig) (*IPTablesProxier, error) {
	return nil, errors.New("iptables: not merged yet")
}

func CleanupIPTables(context.Context, IPTables) error { return nil }

type IPVSHandle interface{}

type IPVSOptions struct{ Scheduler string }

type IPVSProxier struct{ ModeProxier }

func NewIPVSProxier(IPVSHandle, ProxierConfig, IPVSOptions) (*IPVSProxier, error) {
	return nil, errors.New("ipvs: not merged yet")
}

func IPVSSupported() error { return errors.New("ipvs: not merged yet (kernel module ip_vs)") }

func NewIPVSKernel() (IPVSHandle, error) { return nil, errors.New("ipvs: not merged yet") }

func CleanupIPVS(context.Context) error { return nil }

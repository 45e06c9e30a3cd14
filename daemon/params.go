package daemon

import (
	"net/netip"

	"github.com/ovnedge/ovnedge/desired"
)

// ReasonNBSyncFailed is the Warning event of an object whose
// Northbound rows the server refused.
const ReasonNBSyncFailed = "NorthboundSyncFailed"

// ParamsFrom returns the desired-state Params of a configuration.
func ParamsFrom(cfg *Config) desired.Params {
	p := desired.Params{Pools: cfg.LBPools, LBClass: cfg.LBClass, Bridge: cfg.Bridge, Uplink: cfg.Uplink, Patch: cfg.Patch(),
		Zone: cfg.CTZone, EnableEgressIP: cfg.EnableEgressIP, HostGuard: cfg.HostGuard,
		EnableEgressService: cfg.EnableEgressService, GatewayFlows: cfg.GatewayFlows, BridgeMAC: cfg.BridgeMAC,
		LBSvc: cfg.EnableLBSvc, LBSvcImage: cfg.LBSvcImage,
		BGP: cfg.EnableBGP, BGPEgressIPs: cfg.EnableBGP && cfg.BGPEgressIPs, L2Announce: cfg.EnableL2Announce,
		Underlay: cfg.UnderlayLBMode, ProviderVLAN: uint16(cfg.ProviderVLAN)}
	if cfg.ProviderBridge != "" {
		p.ProviderNIC = cfg.ProviderNIC
	}
	p.LB.PreferLocal, p.LB.LSCtSkipDstLportIPs = cfg.PreferLocal, cfg.LSCtSkipDstLportIPs
	for _, cs := range cfg.ClusterSubnets {
		p.Egress.ClusterSubnets = append(p.Egress.ClusterSubnets, cs.CIDR)
		p.LB.ClusterSubnets = append(p.LB.ClusterSubnets, cs.CIDR)
	}
	p.LB.MasqueradeSubnetV4, p.LB.MasqueradeSubnetV6 = cfg.MasqueradeSubnetV4, cfg.MasqueradeSubnetV6
	p.LB.PerNodeLBs, p.LB.SourceRanges, p.LB.EmptyLBEvents = !cfg.LBTemplates, cfg.LBSourceRanges, cfg.OVNEmptyLBEvents
	for _, j := range []netip.Prefix{cfg.JoinSubnet, cfg.JoinSubnet6} {
		if j.IsValid() {
			p.Egress.JoinSubnets = append(p.Egress.JoinSubnets, j)
		}
	}
	return p
}

package ovsflow

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/ovn-kubernetes/libovsdb/cache"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
)

// ovsInterface is the part of an Open_vSwitch Interface row that port
// resolution reads.
type ovsInterface struct {
	UUID     string  `ovsdb:"_uuid"`
	Name     string  `ovsdb:"name"`
	Type     string  `ovsdb:"type"`
	Ofport   *int    `ovsdb:"ofport"`
	MacInUse *string `ovsdb:"mac_in_use"`
}

// ovsPort and ovsBridge are the parts of the Port and Bridge rows that
// [OVSDBPorts.Uplink] reads.
type ovsPort struct {
	UUID       string   `ovsdb:"_uuid"`
	Name       string   `ovsdb:"name"`
	Interfaces []string `ovsdb:"interfaces"`
}

type ovsBridge struct {
	UUID        string            `ovsdb:"_uuid"`
	Name        string            `ovsdb:"name"`
	Ports       []string          `ovsdb:"ports"`
	ExternalIDs map[string]string `ovsdb:"external_ids"`
}

// OVSDBPorts reads ofports from the Open_vSwitch database and watches them,
// so an [Applier] notices a port whose number changes (or that appears once
// ovs-vswitchd has added it).
type OVSDBPorts struct {
	c       client.Client
	changed chan struct{}
}

// DialOVSDBPorts connects to the Open_vSwitch database at endpoint (for
// example "unix:/var/run/openvswitch/db.sock") and monitors the Interface
// table's names, types, ofports and MAC addresses (and the bridges' ports,
// for [OVSDBPorts.Uplink]), reconnecting when the connection drops.
func DialOVSDBPorts(ctx context.Context, endpoint string) (*OVSDBPorts, error) {
	dbModel, err := model.NewClientDBModel("Open_vSwitch", map[string]model.Model{
		"Interface": &ovsInterface{}, "Port": &ovsPort{}, "Bridge": &ovsBridge{}})
	if err != nil {
		return nil, fmt.Errorf("ovsdb model: %w", err)
	}
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval, bo.MaxInterval, bo.MaxElapsedTime = 50*time.Millisecond, 2*time.Second, 0
	c, err := client.NewOVSDBClient(dbModel, client.WithEndpoint(endpoint), client.WithReconnect(5*time.Second, bo))
	if err != nil {
		return nil, fmt.Errorf("ovsdb client for %s: %w", endpoint, err)
	}
	if err := c.Connect(ctx); err != nil {
		return nil, fmt.Errorf("connect to %s: %w", endpoint, err)
	}
	p := &OVSDBPorts{c: c, changed: make(chan struct{}, 1)}
	notify := func() {
		select {
		case p.changed <- struct{}{}:
		default:
		}
	}
	c.Cache().AddEventHandler(&cache.EventHandlerFuncs{
		AddFunc:    func(table string, _ model.Model) { notifyIf(table == "Interface", notify) },
		DeleteFunc: func(table string, _ model.Model) { notifyIf(table == "Interface", notify) },
		UpdateFunc: func(table string, old, cur model.Model) {
			o, ok := old.(*ovsInterface)
			n, _ := cur.(*ovsInterface)
			if ok && n != nil && (ofport(o) != ofport(n) || o.Name != n.Name) {
				notify()
			}
		},
	})
	iface, port, br := &ovsInterface{}, &ovsPort{}, &ovsBridge{}
	if _, err := c.Monitor(ctx, c.NewMonitor(client.WithTable(iface, &iface.Name, &iface.Type, &iface.Ofport, &iface.MacInUse),
		client.WithTable(port, &port.Name, &port.Interfaces),
		client.WithTable(br, &br.Name, &br.Ports, &br.ExternalIDs))); err != nil {
		c.Close()
		return nil, fmt.Errorf("monitor Interface on %s: %w", endpoint, err)
	}
	// The initial rows are not a change.
	select {
	case <-p.changed:
	default:
	}
	return p, nil
}

func notifyIf(cond bool, notify func()) {
	if cond {
		notify()
	}
}

func ofport(i *ovsInterface) int {
	if i.Ofport == nil {
		return -1
	}
	return *i.Ofport
}

// Ports returns the ofport of every interface that has one.
func (p *OVSDBPorts) Ports(ctx context.Context) (PortMap, error) {
	var ifaces []ovsInterface
	if err := p.c.List(ctx, &ifaces); err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	m := make(PortMap, len(ifaces))
	for i := range ifaces {
		if n := ofport(&ifaces[i]); n > 0 {
			m[ifaces[i].Name] = uint32(n)
		}
	}
	return m, nil
}

// MAC returns the MAC address the interface named iface uses (its
// mac_in_use column): for a bridge's own interface, the bridge MAC.
func (p *OVSDBPorts) MAC(ctx context.Context, iface string) (net.HardwareAddr, error) {
	var ifaces []ovsInterface
	if err := p.c.WhereCache(func(i *ovsInterface) bool { return i.Name == iface }).List(ctx, &ifaces); err != nil {
		return nil, fmt.Errorf("interface %s: %w", iface, err)
	}
	if len(ifaces) == 0 {
		return nil, fmt.Errorf("interface %s: not in the Open_vSwitch database", iface)
	}
	if ifaces[0].MacInUse == nil || *ifaces[0].MacInUse == "" {
		return nil, fmt.Errorf("interface %s: no mac_in_use yet", iface)
	}
	mac, err := net.ParseMAC(*ifaces[0].MacInUse)
	if err != nil || len(mac) != 6 {
		return nil, fmt.Errorf("interface %s: mac_in_use %q is not a MAC address", iface, *ifaces[0].MacInUse)
	}
	return mac, nil
}

// Uplink is the bridge port of the physical NIC of the bridge named
// bridge, chosen by [Uplink] from the database's rows.
func (p *OVSDBPorts) Uplink(ctx context.Context, bridge string) (string, error) {
	var brs []ovsBridge
	if err := p.c.WhereCache(func(b *ovsBridge) bool { return b.Name == bridge }).List(ctx, &brs); err != nil {
		return "", fmt.Errorf("bridge %s: %w", bridge, err)
	}
	if len(brs) == 0 {
		return "", fmt.Errorf("bridge %s: not in the Open_vSwitch database", bridge)
	}
	ports := make([]BridgePort, 0, len(brs[0].Ports))
	for _, uuid := range brs[0].Ports {
		port := &ovsPort{UUID: uuid}
		if err := p.c.Get(ctx, port); err != nil {
			continue // a port the cache does not hold yet
		}
		bp := BridgePort{Name: port.Name}
		for _, iu := range port.Interfaces {
			i := &ovsInterface{UUID: iu}
			if err := p.c.Get(ctx, i); err == nil {
				bp.Types = append(bp.Types, i.Type)
			}
		}
		ports = append(ports, bp)
	}
	return Uplink(bridge, brs[0].ExternalIDs["bridge-uplink"], ports)
}

// Changed receives a value after an interface appears, vanishes or gets a
// new ofport.
func (p *OVSDBPorts) Changed() <-chan struct{} { return p.changed }

// Close disconnects from the database.
func (p *OVSDBPorts) Close() { p.c.Close() }

package unidle

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/ovn-kubernetes/libovsdb/cache"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"
	corev1 "k8s.io/api/core/v1"

	"github.com/ovnedge/ovnedge/event"
	"github.com/ovnedge/ovnedge/ovsdbnb"
)

// ReasonNeedPods is the reason of the Normal event on a Service whose
// load balancer a connection reached without backends, with
// OVN-Kubernetes' message "The service <name> needs pods".
const ReasonNeedPods = "NeedPods"

// Event is an empty_lb_backends row of the Southbound's Controller_Event
// table.
type Event struct {
	UUID string
	// VIP is "ip:port" ("[ip]:port" for IPv6), Protocol "tcp", "udp"
	// or "sctp", LoadBalancer the load balancer's Southbound UUID.
	VIP, Protocol, LoadBalancer string
}

// controllerEvent is the Southbound Controller_Event row (every column:
// the cache drops an update naming a column the model lacks).
type controllerEvent struct {
	UUID      string            `ovsdb:"_uuid"`
	EventType string            `ovsdb:"event_type"`
	EventInfo map[string]string `ovsdb:"event_info"`
	Chassis   *string           `ovsdb:"chassis"`
	SeqNum    int               `ovsdb:"seq_num"`
}

const emptyLBBackends = "empty_lb_backends"

// Events watches the Southbound's Controller_Event table.
type Events struct {
	sb     client.Client
	log    *slog.Logger
	mu     sync.Mutex
	queue  []Event
	wake   chan struct{}
	queued map[string]bool
}

// Dial connects to the Southbound at endpoints (unix:, tcp:, ssl:, with
// tlsConfig for ssl:) and monitors Controller_Event.
func Dial(ctx context.Context, endpoints []string, tlsConfig *tls.Config, log *slog.Logger) (*Events, error) {
	if log == nil {
		log = slog.Default()
	}
	sb, err := ovsdbnb.DialSouthbound(ctx, endpoints, tlsConfig, map[string]model.Model{"Controller_Event": &controllerEvent{}})
	if err != nil {
		return nil, fmt.Errorf("unidle: %w", err)
	}
	e := &Events{sb: sb, log: log, wake: make(chan struct{}, 1), queued: map[string]bool{}}
	sb.Cache().AddEventHandler(&cache.EventHandlerFuncs{AddFunc: func(_ string, m model.Model) {
		if r, ok := m.(*controllerEvent); ok {
			e.add(r)
		}
	}})
	var rows []controllerEvent // those before the handler
	if err := sb.List(ctx, &rows); err != nil {
		sb.Close()
		return nil, fmt.Errorf("unidle: list the controller events: %w", err)
	}
	for i := range rows {
		e.add(&rows[i])
	}
	return e, nil
}

// add queues an empty_lb_backends row once.
func (e *Events) add(r *controllerEvent) {
	if r.EventType != emptyLBBackends {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.queued[r.UUID] {
		return
	}
	e.queued[r.UUID] = true
	e.queue = append(e.queue, Event{UUID: r.UUID, VIP: r.EventInfo["vip"], Protocol: r.EventInfo["protocol"],
		LoadBalancer: r.EventInfo["load_balancer"]})
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Run deletes each empty_lb_backends row, those in the table first, and
// calls handle with it, until ctx ends. A row that cannot be deleted is
// logged and handled all the same (OVN-Kubernetes deletes it first and
// drops the event when the delete fails). A handled row is forgotten:
// the rows seen are not kept for the process's life.
func (e *Events) Run(ctx context.Context, handle func(Event)) {
	for {
		e.mu.Lock()
		q := e.queue
		e.queue = nil
		e.mu.Unlock()
		for _, ev := range q {
			if err := e.delete(ctx, ev.UUID); err != nil && ctx.Err() == nil {
				e.log.Warn("unidle: delete the controller event", "uuid", ev.UUID, "vip", ev.VIP, "err", err)
			}
			handle(ev)
			e.mu.Lock()
			delete(e.queued, ev.UUID)
			e.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-e.wake:
		}
	}
}

// delete removes the Controller_Event row uuid.
func (e *Events) delete(ctx context.Context, uuid string) error {
	ops, err := e.sb.Where(&controllerEvent{UUID: uuid}).Delete()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := e.sb.Transact(ctx, ops...)
	if err == nil {
		_, err = ovsdb.CheckOperationResults(res, ops)
	}
	return err
}

// Close disconnects.
func (e *Events) Close() { e.sb.Close() }

// Serve records the NeedPods event of every controller event until ctx
// ends: it dials the Southbound with dial (again every retry until it
// connects), finds each event's Service among services() and calls
// record with its event; an event no Service has is logged.
func Serve(ctx context.Context, dial func(context.Context) (*Events, error), retry time.Duration,
	services func() []*corev1.Service, record func(event.Event), log *slog.Logger) {
	events, err := dial(ctx)
	for err != nil {
		log.Error("unidle: southbound", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
		events, err = dial(ctx)
	}
	defer events.Close()
	log.Info("unidle: watching the Southbound's controller events")
	events.Run(ctx, func(ev Event) {
		e, ok := NeedPods(services(), ev)
		if !ok {
			log.Warn("unidle: no Service has the controller event's VIP", "vip", ev.VIP, "protocol", ev.Protocol)
			return
		}
		record(e)
		log.Info("unidle: NeedPods", "service", e.Object.Namespace+"/"+e.Object.Name, "vip", ev.VIP)
	})
}

// NeedPods returns the NeedPods event of ev: on the Service among svcs
// one of whose ClusterIPs, ExternalIPs or LoadBalancer ingress IPs and
// ports is ev's VIP, with ev's protocol. ok is false when none is.
func NeedPods(svcs []*corev1.Service, ev Event) (event.Event, bool) {
	vip, err := netip.ParseAddrPort(ev.VIP)
	if err != nil {
		return event.Event{}, false
	}
	proto := corev1.ProtocolTCP
	switch ev.Protocol {
	case "udp":
		proto = corev1.ProtocolUDP
	case "sctp":
		proto = corev1.ProtocolSCTP
	}
	for _, s := range svcs {
		if hasVIP(s, vip, proto) {
			return event.Normalf(event.Ref("v1", "Service", s), ReasonNeedPods, "The service %s needs pods", s.Name), true
		}
	}
	return event.Event{}, false
}

// hasVIP reports whether s serves vip with proto.
func hasVIP(s *corev1.Service, vip netip.AddrPort, proto corev1.Protocol) bool {
	if !slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool {
		return p.Port == int32(vip.Port()) && (p.Protocol == proto || (p.Protocol == "" && proto == corev1.ProtocolTCP))
	}) {
		return false
	}
	ips := append(slices.Clone(s.Spec.ClusterIPs), s.Spec.ExternalIPs...)
	if len(s.Spec.ClusterIPs) == 0 {
		ips = append(ips, s.Spec.ClusterIP)
	}
	for _, in := range s.Status.LoadBalancer.Ingress {
		ips = append(ips, in.IP)
	}
	return slices.ContainsFunc(ips, func(ip string) bool {
		a, err := netip.ParseAddr(ip)
		return err == nil && a.Unmap() == vip.Addr().Unmap()
	})
}

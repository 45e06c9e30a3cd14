// Package ovsdbnb writes the OVN Northbound database the way OVN-Kubernetes
// does: typed, idempotent transactions (over libovsdb) for load balancers and
// their groups, logical router policies (allow/reroute/drop), NAT rules,
// address sets and QoS rules, plus the router and switch attachments they
// need.
//
// # Client
//
// Dial connects to one or several endpoints ("unix:", "tcp:", "ssl:" with
// a key, certificate and CA), only to the leader of a RAFT cluster unless
// told otherwise, and follows the leader when it changes or dies. It
// reconnects with exponential backoff, probes an idle connection with
// echoes, and monitors only the tables in Tables, and of those only the
// columns it reads (the routers' and switches' ports, static routes and
// ACLs, the logical ports themselves, are never sent to it), so its cache
// holds nothing else (about 4 KB per load balancer).
//
// # Reconciler
//
// Sync takes the desired rows of many owners (an EgressIP, a Service, the
// cluster-wide policies: see Owner and State) and makes each owner's rows
// equal to them with the fewest operations: an insert per new row, an
// update of the changed columns only, a mutation of the changed map keys
// and set elements, a delete per row no longer wanted. Many owners go in
// one transaction, bounded by SyncOptions.BatchOps; an owner is never
// split. A large Sync pipelines its transactions: two are in flight, so
// the client plans and encodes the next batch and decodes the update of
// the last one while the server commits. Batches hold disjoint owners and
// change the rows they share (routers, switches, groups) only by
// mutation, so the order of their commits does not matter. A second Sync
// with the same desired state sends nothing.
//
// Rows are found by owner through a client index, never by a remembered
// UUID. Rows without the owner's stamp are never touched, nor are the map
// keys another writer adds to an owned row (its external_ids, options or
// vips): the keys Sync wrote are recorded in the row (KeyManaged) and only
// those are ever changed or removed.
//
// Rows written by someone else without the owner stamp (OVN-Kubernetes'
// own rows, or legacy ones such as EgressIP policies with only
// {name: <EgressIP>}) are taken over in place when an owner wants a row of
// the same identity (load balancer or address set name; policy router,
// priority and match; NAT router, type and addresses; QoS direction,
// priority and match): the row keeps its UUID, gets the stamp, and every
// key of its maps counts as the owner's, so stale keys go
// (Result.Adopted). A first Sync over an NB OVN-Kubernetes filled with the
// same desired rows therefore inserts and deletes nothing.
//
// Chassis_Template_Var rows (OVN 22.12+, TemplateVar) are one per chassis
// and shared by every owner: an owner adds and removes only its variables,
// recorded in the row's external_ids under KeyTemplateVars + owner; a
// variable already set to the wanted value is recorded, not rewritten.
// Rows are inserted once (before the owners' rows, like load balancer
// groups) and never deleted.
//
// An invalid owner (a match with a syntax error, a router that does not
// exist, a VIP or load balancer name another owner holds, a map key the
// server's schema does not accept such as a QoS "mark" action on OVN
// 23.03: see Client.SupportsKey, ...) fails alone
// with an *OwnerError naming the owner and the row; the other owners of the
// batch are written. Rows already programmed for the failed owner are left
// as they are.
//
// The cache can lag a committed transaction (libovsdb#212): after its own
// commits Sync waits until the cache shows them, and a row is inserted
// with a UUID derived from its table, owner and identity, so that an
// insert planned from a lagging cache (another instance wrote the row, or
// a reply was lost when a RAFT leader died) is refused by the server as a
// "duplicate uuid" and the batch is planned again once the cache has
// caught up. Nothing is ever inserted twice.
//
// SyncSteps writes steps that must commit in order (the make-before-break
// steps of an egress IP's move: SNATs on the new node, the reroute, the
// old SNATs deleted) and saves their round trips where it can: a step
// that changes, for every owner it shares with the step before, other
// parts of the State (policies after NATs, NATs after policies) is
// planned at once and sent behind the step before, with wait operations
// (timeout 1 s) on rows that step writes. The server holds it until that
// step has committed, whichever reaches the server first, and if that
// step did not commit (an owner refused) the wait fails and the step is
// planned and sent again once the step before is done, as Sync after Sync
// would. A step that changes a part a step still unanswered writes (the
// old SNATs' deletion after the new SNATs) is sent at once too when its
// plan against the cache as it is makes every operation of that step's
// plan for the owner: those are left out (the step's rows will be as that
// step writes them) and what is left is what Sync would plan once that
// step has committed; the step waits for that step's rows too. All three
// steps of a move then reach the server before the first is answered.
// TestSyncSteps checks the commit order in the database's log;
// TestSyncStepsRefused the refused step; TestSyncStepsAllSent that the
// three steps are sent before any reply.
//
// # Drift and restarts
//
// The client's monitor tells what changed in the rows it caches:
// TakeChanges names the owners whose rows were inserted, updated, deleted
// or detached from a router or switch (by anyone: the monitor does not
// say who wrote), whether routers, switches or load balancer groups were
// created, deleted, attached or detached, and whether the client
// reconnected (the cache is then reloaded, and the database may have been
// replaced). A lost connection and the reconnection that ends it are
// logged. Drifted tells which of them differ from the States last
// written: the client's own writes come back equal to them (echoes) and
// need no Sync; another writer's edits, deletions and detachments, and a
// wiped database (groups included), do. Once a Sync's context has ended
// no further transaction is sent.
//
// Current reads back each owner's State from the cache, as Sync would
// write it: a controller that restarts, or takes over from another
// instance, starts from it instead of from nothing.
//
// # OVN-Kubernetes conventions
//
// The rows are those OVN-Kubernetes writes (its default network
// controller, as of commit 8871cd9cec9c45d6da1baf9e3b06eb575f49039c of
// August 2026, github.com/ovn-kubernetes/ovn-kubernetes), so either can
// read what the other wrote. This package writes the rows it is given;
// egress builds the EgressIP ones and lbsvc the load balancer ones (and
// check them against OVN-Kubernetes' unit-test vectors). The daemon's
// TestCoexistOVNK fills a real NB with the whole row set OVN-Kubernetes
// writes for a three-node cluster (current and legacy EgressIP scheme)
// and checks that the first sync over it inserts, updates and deletes
// nothing:
//
//   - OVN-Kubernetes finds its rows by k8s.ovn.org/id, built as its
//     DbObjectIDs do (go-controller/pkg/libovsdb/ops/db_object_ids.go):
//     "<controller>:<owner type>" then the values of the keys of the
//     object's ObjectIDsType in that type's order (db_object_types.go).
//     Each key is an external id too, beside
//     k8s.ovn.org/owner-controller (DefaultController) and
//     k8s.ovn.org/owner-type. An EgressIP policy (and the reply-traffic
//     QoS rule) is "<controller>:EgressIP:<priority>:<name>:<ip-family>:<network>",
//     e.g. "default-network-controller:EgressIP:100:eip1_default/web:ip4:default";
//     an EgressIP NAT "<controller>:EgressIP:<name>:<ip-family>" (no
//     network key); an address set e.g.
//     "default-network-controller:EgressIP:egressip-served-pods:v4:default".
//   - Egress policies on ovn_cluster_router: 1004 reroute of a node's pods
//     to its own host IP (via its management port; no external_ids), 102
//     allow of east-west, join-subnet, node (pkt_mark=1008) and reply
//     (pkt.mark == 42) traffic, 100 reroute of an EgressIP's pods to the
//     gateway routers' join IPs (ECMP).
//   - EgressIP SNAT: type=snat on GR_<node>, external_ip=<egress IP>,
//     logical_ip=<pod IP>, logical_port=k8s-<node>, options:stateless=false.
//   - QoS: one row per family held by every node switch's qos_rules,
//     priority 103, from-lport, "ip4.src == $<served pods> && ct.trk &&
//     ct.rpl", action mark=42 (a NB schema of OVN 24.03 or newer).
//   - Address_Set name: "a" + decimal FNV-1a 64 of its k8s.ovn.org/id
//     (AddressSetName), referred to as "$<name>" in matches.
//   - Load_Balancer: names "Service_<ns>/<name>_<PROTO>_cluster",
//     _node_router_<node>, _node_switch_<node>, _node_router+switch_<node>,
//     _node_local_router_<node>, _node_switch_template_IPv4 /
//     _node_router_template_IPv4 and a "_merged" suffix (lbsvc builds them),
//     external_ids k8s.ovn.org/kind=Service and k8s.ovn.org/owner=<ns>/<name>,
//     lowercase protocol, vips "<vip>:<port>" ("[v6]:port", or
//     "^NODEIP_IPv4_0:<port>" on template=true rows) to comma-joined
//     backends, options reject, event, skip_snat, neighbor_responder=none,
//     hairpin_snat_ip; in the clusterLBGroup, clusterSwitchLBGroup and
//     clusterRouterLBGroup Load_Balancer_Groups.
//   - Chassis_Template_Var: one row per chassis, variables NODEIP_IPv4_<i>
//     and per-Service target templates, no external_ids of ovn-k's (ours
//     records each owner's variables, see above).
//   - Topology (EnsureTopology): ovn_cluster_router with rtos-<node> to
//     the node switch <node> (stor-<node>, management port k8s-<node>),
//     the join switch, GR_<node> with rtoj-GR_<node> and rtoe-GR_<node> to
//     ext_<node> (etor-GR_<node> with nat-addresses=router) and the
//     localnet port breth0_<node> (network_name=physnet).
//
// Two keys are this package's own: KeyOwnedBy ("ovnedge.io/owner", the
// owner) and KeyManaged (the map keys it wrote). OVN-Kubernetes ignores
// them.
//
// # Cost
//
// Creating 10,000 load balancers (BenchmarkCreateLoadBalancers, side by
// side with the same insert rows sent as bare transactions by a client
// that monitors nothing) costs 2.7-2.9x the raw side's CPU: 0.85-0.86 s
// of the client's against 0.16-0.19 s, 0.45-0.46 s of the server's
// against 0.30 s, and 2.3-2.5x its wall time (three runs on the quiet
// 2-core machine; 3.0-3.2x CPU when other tests share it).
// The difference is the cache: the server encodes, and the client
// decodes, the update of every row written (libovsdb's JSON decoding
// into generic rows, then reflection into the typed model: about 40% of
// the client's CPU outside the garbage collector), the garbage of both,
// and the plan (about 30%). Monitoring only the columns the package
// reads changes nothing there, a load balancer's every column being
// read; it keeps the ports, routes and ACLs of a large cluster's routers
// and switches out of the cache. A full Sync (the leader's initial and
// periodic ones) indexes each table's rows by owner in one scan and the
// Chassis_Template_Var rows once (BenchmarkResyncWithChassis: 10,000
// Services and 2,000 chassis synced again unchanged, 11 s -> 0.5-0.8 s).
//
// A Sync of a few owners (one Kubernetes event's) costs what those owners
// touch, not what the NB holds. The index of the routers, switches and
// groups (which router holds a policy or NAT, which rows hold a load
// balancer, group or QoS row) is kept between Syncs: libovsdb replaces a
// cached row when it changes, so comparing row pointers finds the rows to
// index again, and an index is copied on write (its rows in 64 shards
// per table, its reverse maps in 4,096, its name maps only when a row is
// renamed, created or deleted) so that concurrent Syncs and Drifted read
// theirs without a lock. Drifted reads an owner back against the routers
// alone unless the owner wrote load balancers, groups or QoS rows.
// The cost left per Sync is that pointer comparison, one pass over the
// 6,000 shared rows of 2,000 nodes (rebuilding the index every Sync had
// cost 10-25 ms there), and over the 2,000 routers only when no owner of
// the Sync wants a load balancer, group or QoS row (an EgressIP's
// policies and NATs hang off routers): each table's part of the index
// is of the moment it was last read, and a plan that meets a load
// balancer or QoS row of its owner in the cache reads the other tables
// before planning it. A small Sync looks up an owner's
// Chassis_Template_Var records row by row instead of indexing every
// NodePort Service's record, and finds the rows to adopt through the
// owner index (the unstamped rows are filed under an empty owner). Once a
// full Sync has read every record on the connection, an owner that wants
// no variable and whose record the client has neither read nor written
// since (an EgressIP, a ClusterIP Service) is not looked up at all, by
// Sync or Drifted. That assumes what the rest of the package assumes of
// an owner's rows: that one writer (the leader) writes its records; a
// reconnection makes the records unknown until the next full Sync.
//
// # Models
//
// The nbdb package is generated by libovsdb's modelgen from the OVN 23.03
// NB schema (7.0.0); `go generate ./ovsdbnb` reproduces it byte for byte.
// It is generated -extended, as OVN-Kubernetes' is: with typed deep-copy and
// equality methods, which libovsdb's cache uses on every update and lookup
// (without them it copies rows through encoding/json).
package ovsdbnb

//go:generate go run github.com/ovn-kubernetes/libovsdb/cmd/modelgen -extended -p nbdb -o nbdb /usr/share/ovn/ovn-nb.ovsschema

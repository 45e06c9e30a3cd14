package ovsdbnb

import (
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
)

// External_ids keys of the OVN-Kubernetes ownership scheme
// (go-controller/pkg/libovsdb/ops/db_object_ids.go). Rows written with them are indistinguishable from the rows
// OVN-Kubernetes writes.
const (
	KeyOwnerController = "k8s.ovn.org/owner-controller"
	KeyOwnerType       = "k8s.ovn.org/owner-type"
	KeyName            = "k8s.ovn.org/name"
	KeyID              = "k8s.ovn.org/id"
	KeyIPFamily        = "ip-family"
	KeyNetwork         = "network"
	KeyPriority        = "priority"
	// KeyKind and KeyOwner are the load balancer keys: kind "Service",
	// owner "<namespace>/<name>".
	KeyKind  = "k8s.ovn.org/kind"
	KeyOwner = "k8s.ovn.org/owner"
	// KeyOwnedBy is stamped by the reconciler on every row it writes, with
	// Owner.String() as value: it finds an owner's rows by it.
	KeyOwnedBy = "ovnedge.io/owner"
	// KeyManaged records, on every row the reconciler writes, which keys
	// of the row's map columns it wrote ("external_ids=k1,k2;options=k3;
	// vips=k4"), so keys another writer adds to the same row are told
	// apart and never touched.
	KeyManaged = "ovnedge.io/managed"
	// KeyTemplateVars + Owner.String() is the external_ids key of a
	// Chassis_Template_Var row listing the variables (comma-separated,
	// sorted) that owner holds in it.
	KeyTemplateVars = "ovnedge.io/vars:"
	// KeyACL is on every ACL row the reconciler writes (value "true"):
	// the client monitors only the ACL rows that have it, not the
	// thousands of OVN-Kubernetes' network policies.
	KeyACL = "ovnedge.io/acl"
)

// DefaultController is the owner-controller value of OVN-Kubernetes'
// default network controller.
const DefaultController = "default-network-controller"

// Owner is whose rows a State holds: an EgressIP, a Service, the
// cluster-wide policies. The reconciler finds an owner's rows by it, never
// by a cached UUID.
type Owner struct {
	// Type is the kind of owner, e.g. "EgressIP", "Service",
	// "ClusterPolicies".
	Type string
	// Name identifies the owner within its type, e.g. "eip1" or
	// "default/web".
	Name string
}

// String returns "Type/Name".
func (o Owner) String() string { return o.Type + "/" + o.Name }

// LoadBalancer is a desired Load_Balancer row and where it is attached.
type LoadBalancer struct {
	Name string
	// Protocol is "tcp", "udp" or "sctp".
	Protocol string
	// VIPs maps "vip:port" ("[v6]:port") to comma-joined "ip:port"
	// backends; an empty value rejects when options:reject=true.
	VIPs            map[string]string
	Options         map[string]string
	SelectionFields []string
	ExternalIDs     map[string]string
	// Switches and Routers name the logical switches and routers whose
	// load_balancer column holds this row.
	Switches, Routers []string
	// Groups name the Load_Balancer_Groups whose load_balancer column holds
	// this row.
	Groups []string
}

// LoadBalancerGroup is a desired Load_Balancer_Group and where it is
// attached (its members are the LoadBalancers naming it in Groups).
type LoadBalancerGroup struct {
	Name              string
	Switches, Routers []string
}

// RouterPolicy is a desired Logical_Router_Policy on a named router.
type RouterPolicy struct {
	Router   string
	Priority int
	Match    string
	// Action is "allow", "reroute" or "drop".
	Action      string
	Nexthops    []string
	Options     map[string]string
	ExternalIDs map[string]string
}

// NAT is a desired NAT row on a named router.
type NAT struct {
	Router string
	// Type is "snat", "dnat" or "dnat_and_snat".
	Type        string
	ExternalIP  string
	LogicalIP   string
	LogicalPort string
	Options     map[string]string
	ExternalIDs map[string]string
}

// AddressSet is a desired Address_Set. Its name is derived from
// ExternalIDs[KeyID] (see AddressSetName).
type AddressSet struct {
	Addresses   []string
	ExternalIDs map[string]string
}

// Name returns the set's OVN name, AddressSetName of its k8s.ovn.org/id.
func (a AddressSet) Name() string { return AddressSetName(a.ExternalIDs[KeyID]) }

// QoS is a desired QoS row and the logical switches whose qos_rules hold
// it: one row, shared by all of them (as OVN-Kubernetes' EgressIP
// reply-traffic mark is). QoS is not a root table: a row no switch holds
// is removed by the server, so Switches must name at least one.
type QoS struct {
	Priority int
	// Direction is "from-lport" or "to-lport".
	Direction string
	Match     string
	// Action maps "dscp" (0-63) or "mark" to its value; "mark" needs a NB
	// schema that has it (OVN 24.03's does, 23.03's and 23.06's do not:
	// see Client.SupportsKey).
	Action map[string]int
	// Bandwidth maps "rate" (kbps) and "burst" (kbits) to their values.
	Bandwidth   map[string]int
	ExternalIDs map[string]string
	Switches    []string
}

// ACL is a desired ACL row and the logical switches whose acls hold it:
// one row, shared by all of them, like a QoS row. ACL is not a root
// table either: Switches must name at least one.
type ACL struct {
	Priority int
	// Direction is "from-lport" or "to-lport".
	Direction string
	Match     string
	// Action is "allow", "allow-related", "allow-stateless", "drop" or
	// "reject".
	Action string
	// Name is the ACL's name (at most 63 bytes, optional).
	Name        string
	ExternalIDs map[string]string
	Switches    []string
}

// TemplateVar is one variable of a chassis' Chassis_Template_Var row
// (OVN 22.12+): load balancer templates refer to it as "^" + Name, and
// each chassis expands it to its own Value. The row of a chassis is
// shared by every owner (as OVN-Kubernetes' Service controllers share
// it): an owner holds only its variables, recorded in the row's
// external_ids under KeyTemplateVars + owner.
type TemplateVar struct {
	// Chassis is the chassis name (its Open_vSwitch
	// external_ids:system-id).
	Chassis     string
	Name, Value string
}

// State is the desired NB rows of one owner.
type State struct {
	LoadBalancers []LoadBalancer
	Groups        []LoadBalancerGroup
	Policies      []RouterPolicy
	NATs          []NAT
	AddressSets   []AddressSet
	QoSRules      []QoS
	ACLs          []ACL
	TemplateVars  []TemplateVar
}

// AddressSetName is OVN-Kubernetes' Address_Set name for a k8s.ovn.org/id:
// "a" followed by the decimal FNV-1a 64 hash of the id. A match refers to it
// as "$" + name.
func AddressSetName(id string) string {
	h := fnv.New64a()
	h.Write([]byte(id))
	return "a" + strconv.FormatUint(h.Sum64(), 10)
}

// Equal reports whether s and t are the same rows: the same elements in
// the same order, a nil map or slice equal to an empty one.
func (s State) Equal(t State) bool {
	return slices.EqualFunc(s.LoadBalancers, t.LoadBalancers, LoadBalancer.equal) &&
		slices.EqualFunc(s.Groups, t.Groups, LoadBalancerGroup.equal) &&
		slices.EqualFunc(s.Policies, t.Policies, RouterPolicy.equal) &&
		slices.EqualFunc(s.NATs, t.NATs, NAT.equal) &&
		slices.EqualFunc(s.AddressSets, t.AddressSets, AddressSet.equal) &&
		slices.EqualFunc(s.QoSRules, t.QoSRules, QoS.equal) &&
		slices.EqualFunc(s.ACLs, t.ACLs, ACL.equal) &&
		slices.Equal(s.TemplateVars, t.TemplateVars)
}

func (a LoadBalancer) equal(b LoadBalancer) bool {
	return a.Name == b.Name && a.Protocol == b.Protocol && maps.Equal(a.VIPs, b.VIPs) &&
		maps.Equal(a.Options, b.Options) && slices.Equal(a.SelectionFields, b.SelectionFields) &&
		maps.Equal(a.ExternalIDs, b.ExternalIDs) && slices.Equal(a.Switches, b.Switches) &&
		slices.Equal(a.Routers, b.Routers) && slices.Equal(a.Groups, b.Groups)
}

func (a LoadBalancerGroup) equal(b LoadBalancerGroup) bool {
	return a.Name == b.Name && slices.Equal(a.Switches, b.Switches) && slices.Equal(a.Routers, b.Routers)
}

func (a RouterPolicy) equal(b RouterPolicy) bool {
	return a.Router == b.Router && a.Priority == b.Priority && a.Match == b.Match && a.Action == b.Action &&
		slices.Equal(a.Nexthops, b.Nexthops) && maps.Equal(a.Options, b.Options) && maps.Equal(a.ExternalIDs, b.ExternalIDs)
}

func (a NAT) equal(b NAT) bool {
	return a.Router == b.Router && a.Type == b.Type && a.ExternalIP == b.ExternalIP && a.LogicalIP == b.LogicalIP &&
		a.LogicalPort == b.LogicalPort && maps.Equal(a.Options, b.Options) && maps.Equal(a.ExternalIDs, b.ExternalIDs)
}

func (a AddressSet) equal(b AddressSet) bool {
	return slices.Equal(a.Addresses, b.Addresses) && maps.Equal(a.ExternalIDs, b.ExternalIDs)
}

func (a QoS) equal(b QoS) bool {
	return a.Priority == b.Priority && a.Direction == b.Direction && a.Match == b.Match &&
		maps.Equal(a.Action, b.Action) && maps.Equal(a.Bandwidth, b.Bandwidth) &&
		maps.Equal(a.ExternalIDs, b.ExternalIDs) && slices.Equal(a.Switches, b.Switches)
}

func (a ACL) equal(b ACL) bool {
	return a.Priority == b.Priority && a.Direction == b.Direction && a.Match == b.Match && a.Action == b.Action &&
		a.Name == b.Name && maps.Equal(a.ExternalIDs, b.ExternalIDs) && slices.Equal(a.Switches, b.Switches)
}

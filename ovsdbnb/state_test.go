package ovsdbnb

import (
	"reflect"
	"testing"
)

// fullState has every field of every row set.
func fullState() State {
	return State{
		LoadBalancers: []LoadBalancer{{Name: "lb", Protocol: "tcp", VIPs: map[string]string{"10.96.0.1:80": "10.244.1.3:8080"},
			Options: map[string]string{"reject": "true"}, SelectionFields: []string{"ip_src"},
			ExternalIDs: map[string]string{KeyKind: "Service"}, Switches: []string{"sw0"}, Routers: []string{"lr0"}, Groups: []string{"g"}}},
		Groups: []LoadBalancerGroup{{Name: "g", Switches: []string{"sw0"}, Routers: []string{"lr0"}}},
		Policies: []RouterPolicy{{Router: "lr0", Priority: 100, Match: "ip4", Action: "reroute", Nexthops: []string{"100.64.0.3"},
			Options: map[string]string{"pkt_mark": "1008"}, ExternalIDs: map[string]string{KeyName: "eip"}}},
		NATs: []NAT{{Router: "GR_n", Type: "snat", ExternalIP: "172.18.0.33", LogicalIP: "10.244.1.3", LogicalPort: "k8s-n",
			Options: map[string]string{"stateless": "false"}, ExternalIDs: map[string]string{KeyName: "eip"}}},
		AddressSets: []AddressSet{{Addresses: []string{"10.244.1.3"}, ExternalIDs: map[string]string{KeyID: "x"}}},
		QoSRules: []QoS{{Priority: 103, Direction: "from-lport", Match: "ip4", Action: map[string]int{"mark": 42},
			Bandwidth: map[string]int{"rate": 10}, ExternalIDs: map[string]string{KeyName: "q"}, Switches: []string{"sw0"}}},
		ACLs: []ACL{{Priority: 32000, Direction: "from-lport", Match: "ip4", Action: "drop", Name: "a",
			ExternalIDs: map[string]string{KeyName: "a"}, Switches: []string{"sw0"}}},
		TemplateVars: []TemplateVar{{Chassis: "ch1", Name: "NODEIP_IPv4_0", Value: "172.18.0.2"}},
	}
}

// changeField changes field i of the struct v points to.
func changeField(t *testing.T, v reflect.Value, i int) {
	f := v.Field(i)
	switch f.Kind() {
	case reflect.String:
		f.SetString(f.String() + "x")
	case reflect.Int:
		f.SetInt(f.Int() + 1)
	case reflect.Slice:
		f.Set(reflect.Append(reflect.MakeSlice(f.Type(), 0, f.Len()+1), append(sliceValues(f), reflect.Zero(f.Type().Elem()))...))
	case reflect.Map:
		m := reflect.MakeMap(f.Type())
		m.SetMapIndex(reflect.ValueOf("other"), reflect.Zero(f.Type().Elem()))
		f.Set(m)
	default:
		t.Fatalf("field %s: kind %s not covered", v.Type().Field(i).Name, f.Kind())
	}
}

func sliceValues(s reflect.Value) []reflect.Value {
	out := make([]reflect.Value, s.Len())
	for i := range out {
		out[i] = s.Index(i)
	}
	return out
}

// TestStateEqual changes every field of every row, one at a time: each
// change makes the states unequal (a field added to a row and forgotten
// in its equal fails here).
func TestStateEqual(t *testing.T) {
	if !fullState().Equal(fullState()) {
		t.Fatal("a state differs from its copy")
	}
	if !(State{Policies: []RouterPolicy{{Router: "lr0"}}}).Equal(State{Policies: []RouterPolicy{{Router: "lr0", Nexthops: []string{},
		Options: map[string]string{}}}, NATs: []NAT{}}) {
		t.Error("nil and empty maps and slices differ")
	}
	rows := reflect.TypeOf(State{})
	for r := range rows.NumField() {
		for i := range rows.Field(r).Type.Elem().NumField() {
			s := fullState()
			row := reflect.ValueOf(&s).Elem().Field(r).Index(0)
			changeField(t, row, i)
			if fullState().Equal(s) || s.Equal(fullState()) {
				t.Errorf("%s.%s changed: still equal", rows.Field(r).Name, row.Type().Field(i).Name)
			}
		}
	}
	if s := fullState(); s.Equal(State{LoadBalancers: s.LoadBalancers}) {
		t.Error("a state equals one without its policies")
	}
}

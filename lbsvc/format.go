package lbsvc

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/ovnedge/ovnedge/ovsdbnb"
)

// Format renders the load balancers and groups of states one NB row per
// line, sorted, each line starting with its owner:
//
//	Service/default/web Load_Balancer name="Service_default/web_TCP_cluster" protocol=tcp vips={"10.96.0.10:80"="10.244.1.3:8080"} options={...} external_ids={...} groups=[clusterLBGroup]
//
// It is the format of the testdata/lbsvc goldens and of a debug dump of the
// desired state.
func Format(states map[ovsdbnb.Owner]ovsdbnb.State) []byte {
	var lines []string
	for owner, st := range states {
		for _, lb := range st.LoadBalancers {
			var b strings.Builder
			b.WriteString(owner.String() + " Load_Balancer name=" + strconv.Quote(lb.Name) + " protocol=" + lb.Protocol)
			writeMap(&b, "vips", lb.VIPs)
			writeMap(&b, "options", lb.Options)
			writeMap(&b, "external_ids", lb.ExternalIDs)
			if len(lb.SelectionFields) > 0 {
				writeList(&b, "selection_fields", lb.SelectionFields)
			}
			writeAttach(&b, lb.Groups, lb.Routers, lb.Switches)
			lines = append(lines, b.String())
		}
		for _, v := range st.TemplateVars {
			lines = append(lines, owner.String()+" Chassis_Template_Var chassis="+strconv.Quote(v.Chassis)+
				" "+strconv.Quote(v.Name)+"="+strconv.Quote(v.Value))
		}
		for _, g := range st.Groups {
			var b strings.Builder
			b.WriteString(owner.String() + " Load_Balancer_Group name=" + strconv.Quote(g.Name))
			writeAttach(&b, nil, g.Routers, g.Switches)
			lines = append(lines, b.String())
		}
	}
	slices.Sort(lines)
	if len(lines) == 0 {
		return nil
	}
	return []byte(strings.Join(lines, "\n") + "\n")
}

func writeAttach(b *strings.Builder, groups, routers, switches []string) {
	for _, c := range []struct {
		name string
		v    []string
	}{{"groups", groups}, {"routers", routers}, {"switches", switches}} {
		if len(c.v) > 0 {
			writeList(b, c.name, c.v)
		}
	}
}

func writeMap(b *strings.Builder, name string, m map[string]string) {
	b.WriteString(" " + name + "={")
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(k) + "=" + strconv.Quote(m[k]))
	}
	b.WriteByte('}')
}

func writeList(b *strings.Builder, name string, v []string) {
	b.WriteString(" " + name + "=[" + strings.Join(slices.Sorted(slices.Values(v)), ",") + "]")
}

package ovsflow

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/ovnedge/ovnedge/ovsflow/openflow"
)

// Flows outside the model get keys that read back through parseDump as
// given; only those whose match decoded can be deleted by their key.
func TestOpaqueKeys(t *testing.T) {
	reg0 := []openflow.OXM{{Class: openflow.ClassNXM1, Field: 0, Value: []byte{0, 0, 0, 1}}}
	for i, c := range []struct {
		stats     openflow.FlowStats
		deletable bool
	}{
		{openflow.FlowStats{Table: 3, Priority: 201, Cookie: 0x78, Match: reg0}, true},
		{openflow.FlowStats{Priority: 32768, ActionsErr: errors.New("learn")}, true},
		{openflow.FlowStats{Priority: 5, Cookie: 1, MatchErr: errors.New("experimenter oxm")}, false},
	} {
		key := opaqueKey(&c.stats, i)
		line := string(appendCookie(nil, c.stats.Cookie)) + key + " actions=opaque\n"
		es, err := parseDump([]byte(line))
		if err != nil || es[key] == nil || es[key].cookie != c.stats.Cookie {
			t.Errorf("%q reads back as %v, %v; want key %q", line, es, err, key)
		}
		tr := NewNativeTransport(t.TempDir(), NativeOptions{})
		tr.foreign["br"] = map[string]openflow.FlowStats{key: c.stats}
		fm, ok := tr.foreignDelete("br", key)
		if ok != c.deletable {
			t.Errorf("%q: deletable %v, want %v", key, ok, c.deletable)
		}
		want := openflow.FlowMod{Command: openflow.FlowDeleteStrict, Table: c.stats.Table, Priority: c.stats.Priority, Match: c.stats.Match}
		if ok && !reflect.DeepEqual(fm, want) {
			t.Errorf("%q: delete %+v, want %+v", key, fm, want)
		}
		if !c.deletable && !strings.Contains(key, "undecoded#2") {
			t.Errorf("key of an undecoded match: %q", key)
		}
	}
}

package ovsdbnb_test

import (
	"strings"
	"testing"

	"github.com/ovnedge/ovnedge/ovsdbnb"
)

func TestCheckMatch(t *testing.T) {
	tests := []struct {
		match string
		err   string // "" = valid
	}{
		{`inport == "rtos-ovn-worker" && ip4.dst == 172.18.0.2 /* ovn-worker */`, ""},
		{`(ip4.src == $a1 || ip4.src == $a2) && ip4.dst == $a3`, ""},
		{`ip4.src == 10.244.0.0/16 && ip4.dst == 100.64.0.0/16`, ""},
		{`ip6.src == fd00:10:244::5 && tcp.dst == {80, 443}`, ""},
		{`reg0[0..3] == 0x5 && eth.src == 0a:58:0a:f4:01:03 && !ct.new`, ""},
		{`ip4 && ip.ttl > 1`, ""},
		{`1`, ""},
		{`ip4.src == (10.244.1.3`, `"(" is not a constant`},
		{`(ip4.src == 10.244.1.3`, "missing ')'"},
		{`ip4.src == 10.244.1.3 && ip4.dst == 1.2.3.4 || ip6`, "must be parenthesized"},
		{`ip4.src == 10.244.1.300`, `"10.244.1.300" is not a constant`},
		{`ip4.src ==`, `"" is not a constant`},
		{`ip4.src == {1.2.3.4, 5.6.7.8`, "missing '}'"},
		{`ip4.src = 1.2.3.4`, "unexpected"},
		{``, "empty"},
		{`ip4.src == 1.2.3.4)`, `unexpected ")"`},
	}
	for _, tc := range tests {
		t.Run(tc.match, func(t *testing.T) {
			err := ovsdbnb.CheckMatch(tc.match)
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("CheckMatch: %v, want nil", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("CheckMatch: %v, want an error containing %q", err, tc.err)
			}
		})
	}
}

// Package openflow is a small OpenFlow 1.3-1.5 controller library: the
// messages, match fields and actions that package ovsflow's flow model can
// express, encoded and decoded exactly, and a [Client] that speaks them to
// Open vSwitch over a bridge's <bridge>.mgmt unix socket or TCP.
//
// The codec covers HELLO (version bitmap negotiation), ECHO, FEATURES,
// BARRIER, ERROR, FLOW_MOD (add, modify-strict, delete-strict, non-strict
// delete of everything), flow-stats multipart requests and replies, and
// bundles (OpenFlow 1.4+ BUNDLE_CONTROL/BUNDLE_ADD, or their ONF
// experimenter form in OpenFlow 1.3). Match fields are OXM basic fields and
// the Nicira fields pkt_mark, ct_state, ct_zone and ct_mark; actions are
// [Output], [SetField], [PopVLAN], [Group] and the Nicira [Resubmit],
// [RegLoad], [Conntrack] with nested [NAT] and exec actions. Anything else
// decodes to an error naming it, never to a silently shortened flow: in a
// flow-stats reply, another controller's flow keeps its place with the
// error in [FlowStats].MatchErr or ActionsErr.
//
// A [Client] dials on first use, negotiates the highest common version
// (OpenFlow 1.5 down to 1.3), answers and sends echo requests to detect a
// dead switch, and dials again after the connection drops; [Client.Watch]
// keeps it connected with backoff and reports every new handshake, which
// is when a controller must replay its flows. [Client.Bundle] applies
// flow-mods atomically: an error from the switch comes back as a
// [ModError] naming the offending flow-mod's index, and the bundle is
// discarded.
package openflow

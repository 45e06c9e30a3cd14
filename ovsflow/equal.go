package ovsflow

import "bytes"

// flowsEqual reports whether a and b are the same flows in the same order,
// field by field: what lets [Program.Set] keep an owner whose flows did not
// change without rendering them.
func flowsEqual(a, b []Flow) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !flowEqual(&a[i], &b[i]) {
			return false
		}
	}
	return true
}

func flowEqual(a, b *Flow) bool {
	return a.Table == b.Table && a.Priority == b.Priority && a.Cookie == b.Cookie &&
		matchEqual(&a.Match, &b.Match) && actionsEqual(a.Actions, b.Actions)
}

func matchEqual(a, b *Match) bool {
	return a.PktMark == b.PktMark && a.CtState == b.CtState && a.CtZone == b.CtZone && a.CtMark == b.CtMark &&
		a.Proto == b.Proto && a.InPort == b.InPort && a.DlVLAN == b.DlVLAN &&
		bytes.Equal(a.DlSrc, b.DlSrc) && bytes.Equal(a.DlDst, b.DlDst) &&
		a.NwSrc == b.NwSrc && a.NwDst == b.NwDst && a.ARPSpa == b.ARPSpa && a.ARPTpa == b.ARPTpa &&
		a.ARPOp == b.ARPOp && a.TpSrc == b.TpSrc && a.TpDst == b.TpDst &&
		(a.ICMP == b.ICMP || a.ICMP != nil && b.ICMP != nil && *a.ICMP == *b.ICMP) &&
		a.NDTarget == b.NDTarget
}

func actionsEqual(a, b []Action) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !actionEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}

// actionEqual compares two actions: by value, except CT, whose pointers
// and nested actions are compared by what they point to.
func actionEqual(a, b Action) bool {
	ca, ok := a.(CT)
	if !ok {
		if _, isCT := b.(CT); isCT {
			return false
		}
		return a == b // every other action is a comparable value
	}
	cb, ok := b.(CT)
	return ok && ca.Commit == cb.Commit && ca.Zone == cb.Zone &&
		(ca.Table == cb.Table || ca.Table != nil && cb.Table != nil && *ca.Table == *cb.Table) &&
		(ca.NAT == cb.NAT || ca.NAT != nil && cb.NAT != nil && *ca.NAT == *cb.NAT) &&
		actionsEqual(ca.Exec, cb.Exec)
}

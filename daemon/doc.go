// Package daemon is the thin ovnedge daemon: it watches Kubernetes (or
// manifest files) with client-go informers and connects package egress and
// lbsvc, which compute desired state, to ovsflow, ovsdbnb and arp, which
// apply it. It is the only package that knows both sides.
//
// Status: being built under issue 7; `make demo` prints the seed node's flow
// program (examples/seed) until then.
package daemon

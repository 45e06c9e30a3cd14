// Package manifests reads Kubernetes objects from a directory of YAML or
// JSON files (Load) and serves them as an in-memory API server (Source):
// client-go's fake clientsets, kept equal to the files as they change, on
// which shared informers run exactly as on a real API server. ovnedge's
// `--manifests DIR` mode, `ovnedge render` and `ovnedge sync --once` read
// the cluster this way, so a directory of manifests and a cluster share
// every line of the daemon's wiring.
//
//	src := manifests.NewSource("examples/demo", slog.Default())
//	if err := src.Reload(); err != nil { ... }
//	go src.Watch(ctx, 500*time.Millisecond)
//	// informers on src.Clientset and src.Dynamic
//
// Built-in kinds decode to their typed structs; EgressIPs, Kube-OVN's
// Subnets, Multus' NetworkAttachmentDefinitions and MetalLB's pools, L2
// advertisements, BGP peers and BFD profiles are kept as unstructured
// objects; any other kind is an error naming its file.
package manifests

// Package onenode runs ovnedge end to end on a one-node cluster (package
// e2e's harness with Options.Nodes 1): the node's gateway router, its
// chassis and every backend share one datapath, the case a multi-node
// cluster hides when a Service has backends elsewhere. It holds tests
// only; one cluster serves them all (TestMain).
package onenode

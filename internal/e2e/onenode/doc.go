// Package onenode runs ovnedge end to end on a one-node cluster (package
// e2e's harness with Options.Nodes 1): the node's gateway router, its
// chassis and every backend share one datapath, the case a multi-node
// cluster hides when a Service has backends elsewhere: NodePort (with
// templates and ETP=Local), ExternalIP, LoadBalancer ETP=Local, an
// EgressIP whose egress node is the pod's own, ARP bypass and L2
// announce. It holds tests only; one cluster serves them all (TestMain).
// internal/e2e/helm's TestHelmOneNode runs the chart's scenarios on one
// node with ovnedge as kubelet-run containers installed by helm.
package onenode

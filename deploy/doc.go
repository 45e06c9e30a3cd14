// Package deploy holds the tests of ovnedge's release artifacts; it has
// no code of its own.
//
//   - The image (`make image`, scripts/image.sh): built into a temporary
//     directory, its OCI layout is read back with no tool: platform,
//     entrypoint, user, labels, the one static binary of its one layer,
//     which runs `version` and prints the tagged version.
//   - The Helm chart (helm/ovnedge): `helm lint`, `helm template` with the
//     default and with every feature's values, kubeconform on the output
//     with schemas generated from the Kubernetes OpenAPI document of the
//     k8s.io/kubernetes module (the version of the test apiserver) and
//     from the chart's CRDs; the manifests of this directory
//     (rbac.yaml, daemonset.yaml, deployment.yaml, node-identity.yaml,
//     crds/) are the chart's default rendering and must stay equal to it
//     (`make deploy` rewrites them).
//
// daemon/e2e applies the rendered chart to a real kube-apiserver and runs
// the daemon with exactly the rendered arguments.
//
// Tools (crane v0.22.1, helm v3.22.0, kubeconform v0.8.0) are installed by
// scripts/tool.sh with `go install` into ~/.cache/ovnedge/bin on first
// use; from then on the tests are offline.
package deploy

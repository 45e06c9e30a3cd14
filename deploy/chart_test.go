package deploy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ovnedge/ovnedge/daemon"
	"github.com/ovnedge/ovnedge/testbed"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const chart = "helm/ovnedge"

// valueSets are the renderings every check runs on: the defaults (what
// this directory's manifests are) and every feature on.
var valueSets = map[string][]string{
	"default":  nil,
	"features": {"-f", filepath.Join(chart, "ci", "all-values.yaml")},
}

// tool returns the path of a pinned release tool (scripts/tool.sh).
func tool(t testing.TB, name string) string {
	t.Helper()
	cmd := exec.Command("scripts/tool.sh", name)
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/tool.sh %s: %v\n%s", name, err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// run runs argv and returns its stdout; a failure fails the test with
// the command's output.
func run(t testing.TB, argv ...string) string {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s%s", strings.Join(argv, " "), err, out, stderr.String())
	}
	return string(out)
}

// Render renders the chart in namespace kube-system with the given helm
// arguments (values).
func render(t testing.TB, helm string, args ...string) string {
	t.Helper()
	return run(t, append([]string{helm, "template", "ovnedge", chart, "--namespace", "kube-system"}, args...)...)
}

// TestChartLint runs helm lint --strict on every value set.
func TestChartLint(t *testing.T) {
	helm := tool(t, "helm")
	for name, values := range valueSets {
		t.Run(name, func(t *testing.T) {
			run(t, append([]string{helm, "lint", "--strict", chart}, values...)...)
		})
	}
}

// TestChartKubeconform validates every rendering, CRDs included, with
// kubeconform against strict schemas of the test apiserver's Kubernetes
// version and of the chart's CRDs: no resource may be skipped or invalid.
// A typo'd field must be caught (the schemas are strict).
func TestChartKubeconform(t *testing.T) {
	helm, kc := tool(t, "helm"), tool(t, "kubeconform")
	schemas := kubeSchemas(t)
	crds, err := filepath.Glob(filepath.Join(chart, "crds", "*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("chart CRDs: %v %v", crds, err)
	}
	crdDir := t.TempDir()
	crdSchemas(t, crdDir, crds)
	validate := func(t *testing.T, manifests string) (summary map[string]int, out string) {
		t.Helper()
		path := filepath.Join(t.TempDir(), "manifests.yaml")
		if err := os.WriteFile(path, []byte(manifests), 0o644); err != nil {
			t.Fatal(err)
		}
		const layout = "/{{ .Group }}/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json"
		cmd := exec.Command(kc, "-strict", "-summary", "-output", "json",
			"-schema-location", schemas+layout, "-schema-location", crdDir+layout, path)
		b, _ := cmd.CombinedOutput() // non-zero on invalid input: the summary says why
		var res struct {
			Summary struct{ Valid, Invalid, Errors, Skipped int }
		}
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatalf("kubeconform output: %v\n%s", err, b)
		}
		s := res.Summary
		return map[string]int{"valid": s.Valid, "invalid": s.Invalid, "errors": s.Errors, "skipped": s.Skipped}, string(b)
	}
	for name, values := range valueSets {
		t.Run(name, func(t *testing.T) {
			manifests := render(t, helm, append([]string{"--include-crds"}, values...)...)
			sum, out := validate(t, manifests)
			docs := len(regexp.MustCompile(`(?m)^kind: `).FindAllString(manifests, -1))
			if sum["valid"] != docs || sum["invalid"]+sum["errors"]+sum["skipped"] != 0 {
				t.Errorf("kubeconform: %v of %d resources\n%s", sum, docs, out)
			} else {
				t.Logf("kubeconform: %d resources valid", docs)
			}
		})
	}
	t.Run("typo caught", func(t *testing.T) {
		manifests := render(t, helm, "--include-crds")
		bad := strings.Replace(manifests, "  replicas: 2\n", "  replica: 2\n", 1)
		bad = strings.Replace(bad, "    egressIPs:\n", "    egressIP:\n", 1)
		if bad == manifests {
			t.Fatal("no replicas line to break")
		}
		bad += "---\napiVersion: k8s.ovn.org/v1\nkind: EgressIP\nmetadata: {name: e}\nspec: {egressIPs: [1.2.3.4], namespaceSelector: {}, bogus: 1}\n"
		if sum, out := validate(t, bad); sum["invalid"] != 2 {
			t.Errorf("a Deployment with `replica` and an EgressIP with `bogus`: %v, want 2 invalid\n%s", sum, out)
		}
	})
}

// TestChartArgs parses each rendered container's arguments as the daemon
// does ($(NODE_NAME) expanded), for every value set, and checks the
// features' flags reach the right component.
func TestChartArgs(t *testing.T) {
	helm := tool(t, "helm")
	for name, values := range valueSets {
		t.Run(name, func(t *testing.T) {
			ds, dep := workloads(t, render(t, helm, values...))
			node, leader := ds.Spec.Template.Spec.Containers[0], dep.Spec.Template.Spec.Containers[0]
			for _, c := range []struct {
				name string
				c    corev1.Container
			}{{"node", node}, {"leader", leader}} {
				args := slices.Clone(c.c.Args)
				if len(args) == 0 || args[0] != "daemon" || !slices.Equal(c.c.Command, []string{"/usr/local/bin/ovnedge"}) {
					t.Fatalf("%s: command %q args %q, want /usr/local/bin/ovnedge daemon ...", c.name, c.c.Command, args)
				}
				for i := range args {
					args[i] = strings.ReplaceAll(args[i], "$(NODE_NAME)", "node-1")
				}
				cfg, _, err := daemon.ParseConfig("daemon", args[1:])
				if err != nil {
					t.Fatalf("%s args %q: %v", c.name, args, err)
				}
				if len(cfg.ClusterSubnets) == 0 || cfg.ClusterSubnets[0].CIDR.String() != "10.244.0.0/16" || cfg.ClusterSubnets[0].HostPrefix != 24 {
					t.Errorf("%s: cluster subnets %v, want 10.244.0.0/16 with /24 per node", c.name, cfg.ClusterSubnets)
				}
				if err := memLimitFollowed(c.c); err != nil {
					t.Errorf("%s: %v", c.name, err)
				}
				if c.name == "node" && (cfg.NodeName != "node-1" || cfg.LeaderElect) {
					t.Errorf("node: node name %q, leader-elect %v", cfg.NodeName, cfg.LeaderElect)
				}
				if c.name == "leader" && (cfg.NodeName != "" || !cfg.LeaderElect || len(cfg.NBAddress) == 0) {
					t.Errorf("leader: node name %q, leader-elect %v, NB %v", cfg.NodeName, cfg.LeaderElect, cfg.NBAddress)
				}
			}
			if name != "features" {
				return
			}
			has := func(c corev1.Container, flag string) bool {
				return slices.ContainsFunc(c.Args, func(a string) bool { return a == flag || strings.HasPrefix(a, flag+"=") })
			}
			for _, f := range []string{"--enable-bgp", "--bgp-bfd", "--bgp-peer-address", "--bgp-communities", "--enable-l2-announce", "--nb-client-cert"} {
				if !has(node, f) {
					t.Errorf("node has no %s: %q", f, node.Args)
				}
			}
			for _, f := range []string{"--enable-lb-svc", "--lb-svc-image", "--lb-pools", "--nb-client-cert", "--egressip-fast-failover", "--sb-address"} {
				if !has(leader, f) {
					t.Errorf("leader has no %s: %q", f, leader.Args)
				}
			}
			if has(leader, "--enable-bgp") || has(node, "--enable-lb-svc") {
				t.Errorf("BGP on the leader or lb-svc on the node:\n%q\n%q", leader.Args, node.Args)
			}
			var ports []string
			for _, p := range node.Ports {
				ports = append(ports, fmt.Sprintf("%s/%d/%s", p.Name, p.ContainerPort, p.Protocol))
			}
			for _, want := range []string{"bgp/179/TCP", "bfd/3784/UDP"} {
				if !slices.Contains(ports, want) {
					t.Errorf("node ports %q: no %s", ports, want)
				}
			}
		})
	}
}

// memLimitFollowed checks that c has a memory limit and that its
// OVNEDGE_MEMORY_LIMIT is that limit (the Downward API's limits.memory of
// c), of which the daemon gives the Go runtime 90% (GOMEMLIMIT).
func memLimitFollowed(c corev1.Container) error {
	if c.Resources.Limits.Memory().IsZero() {
		return fmt.Errorf("no memory limit")
	}
	i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == daemon.EnvMemoryLimit })
	if i < 0 || c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.ResourceFieldRef == nil {
		return fmt.Errorf("no %s from the container's memory limit: %+v", daemon.EnvMemoryLimit, c.Env)
	}
	if ref := c.Env[i].ValueFrom.ResourceFieldRef; ref.Resource != "limits.memory" || ref.ContainerName != c.Name {
		return fmt.Errorf("%s from %s of container %q, want limits.memory of %q", daemon.EnvMemoryLimit, ref.Resource, ref.ContainerName, c.Name)
	}
	return nil
}

// workloads returns the rendered DaemonSet and Deployment.
func workloads(t testing.TB, manifests string) (*appsv1.DaemonSet, *appsv1.Deployment) {
	t.Helper()
	var ds *appsv1.DaemonSet
	var dep *appsv1.Deployment
	for _, doc := range strings.Split(manifests, "\n---\n") {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("rendered YAML: %v\n%s", err, doc)
		}
		var err error
		switch meta.Kind {
		case "DaemonSet":
			ds = &appsv1.DaemonSet{}
			err = yaml.UnmarshalStrict([]byte(doc), ds)
		case "Deployment":
			dep = &appsv1.Deployment{}
			err = yaml.UnmarshalStrict([]byte(doc), dep)
		}
		if err != nil {
			t.Fatalf("%s: %v", meta.Kind, err)
		}
	}
	if ds == nil || dep == nil || len(ds.Spec.Template.Spec.Containers) != 1 || len(dep.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("rendered chart: want one DaemonSet and one Deployment of one container each")
	}
	return ds, dep
}

// The manifests of this directory and the chart template they come from.
var generated = map[string]string{
	"rbac.yaml":       "templates/rbac.yaml",
	"daemonset.yaml":  "templates/daemonset.yaml",
	"deployment.yaml": "templates/deployment.yaml",
	// the ValidatingAdmissionPolicy of node.identityPolicy
	"node-identity.yaml": "templates/node-identity.yaml",
}

const generatedHeader = "# Generated from deploy/helm/ovnedge (helm template --namespace kube-system,\n# default values) by `make deploy`: edit the chart, not this file.\n"

// TestDeployIsChart checks that deploy/*.yaml are the chart's default
// rendering and deploy/crds the chart's CRDs; UPDATE_DEPLOY=1 (`make
// deploy`) rewrites them.
func TestDeployIsChart(t *testing.T) {
	helm := tool(t, "helm")
	want := map[string]string{}
	for _, doc := range strings.Split(render(t, helm), "---\n") {
		src, body, ok := strings.Cut(doc, "\n")
		tpl, found := strings.CutPrefix(src, "# Source: ovnedge/")
		if !ok || !found {
			continue
		}
		for file, from := range generated {
			if from == tpl {
				if want[file] != "" {
					want[file] += "---\n"
				}
				want[file] += body
			}
		}
	}
	crds, _ := filepath.Glob(filepath.Join(chart, "crds", "*.yaml"))
	for _, crd := range crds {
		b, err := os.ReadFile(crd)
		if err != nil {
			t.Fatal(err)
		}
		want[filepath.Join("crds", filepath.Base(crd))] = string(b)
	}
	for file := range generated {
		if want[file] == "" {
			t.Fatalf("the rendering has nothing of %s", generated[file])
		}
		want[file] = generatedHeader + want[file]
	}
	update := os.Getenv("UPDATE_DEPLOY") == "1"
	for file, w := range want {
		got, err := os.ReadFile(file)
		if update && string(got) != w {
			if err := os.WriteFile(file, []byte(w), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("wrote %s", file)
			continue
		}
		if err != nil || string(got) != w {
			t.Errorf("deploy/%s is not the chart's rendering (%v): run `make deploy` and review the diff", file, err)
		}
	}
	have, _ := filepath.Glob(filepath.Join("crds", "*.yaml"))
	for _, f := range have {
		if _, ok := want[f]; !ok {
			t.Errorf("deploy/%s is not in the chart's crds/", f)
		}
	}
}

// kubeSchemas returns a directory of strict JSON schemas of every
// built-in kind, <group or v1>/<kind>_<version>.json, generated once per
// Kubernetes version from the k8s.io/kubernetes module's
// api/openapi-spec/swagger.json (the test apiserver's version,
// testbed.KubeAPIVersion) into ~/.cache/ovnedge.
func kubeSchemas(t testing.TB) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cache, "ovnedge", "kubeconform-schemas", testbed.KubeAPIVersion)
	if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil {
		return dir
	}
	cmd := exec.Command("go", "mod", "download", "-json", "k8s.io/kubernetes@"+testbed.KubeAPIVersion)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download k8s.io/kubernetes@%s: %v\n%s", testbed.KubeAPIVersion, err, out)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(mod.Dir, "api", "openapi-spec", "swagger.json"))
	if err != nil {
		t.Fatal(err)
	}
	tmp := dir + ".tmp"
	_ = os.RemoveAll(tmp)
	n, err := writeKubeSchemas(data, tmp)
	if err == nil {
		_ = os.RemoveAll(dir)
		err = os.Rename(tmp, dir)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "complete"), nil, 0o644)
	}
	if err != nil {
		t.Fatalf("kubeconform schemas: %v", err)
	}
	t.Logf("generated %d kubeconform schemas of Kubernetes %s in %s", n, testbed.KubeAPIVersion, dir)
	return dir
}

// TestChartMetricsAndProbes renders the chart with several values and
// checks, in each container, that the probes ask the health port (plain
// HTTP, declared as a container port, apart from the metrics port), that
// /metrics is secure exactly when metrics.secure (with the certificate of
// metrics.tlsSecret mounted where the flags say) and its RBAC rendered
// with it, and the node identity policy rendered exactly when
// node.identityPolicy.
func TestChartMetricsAndProbes(t *testing.T) {
	helm := tool(t, "helm")
	for _, tc := range []struct {
		name                      string
		values                    []string
		nodeHealth, leaderHealth  int32
		secure, certFile, vapWant bool
	}{
		{"default", nil, 9475, 9475, true, false, true},
		{"features", valueSets["features"], 9475, 9475, true, true, true},
		{"leader on the host network", []string{"--set", "leader.hostNetwork=true"}, 9475, 9474, true, false, true},
		{"ports", []string{"--set", "healthPort=9000,leader.hostNetwork=true,leader.hostNetworkHealthPort=9001"}, 9000, 9001, true, false, true},
		// an upgrade with --reuse-values from a chart without these values
		{"values of an older chart", []string{"--set", "healthPort=null,metrics=null,leader.hostNetworkHealthPort=null,leader.hostNetwork=true"},
			9475, 9474, true, false, true},
		{"plain metrics, no policy", []string{"--set", "metrics.secure=false,node.identityPolicy=false"}, 9475, 9475, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			manifests := render(t, helm, tc.values...)
			ds, dep := workloads(t, manifests)
			for _, c := range []struct {
				name   string
				c      corev1.Container
				health int32
			}{{"node", ds.Spec.Template.Spec.Containers[0], tc.nodeHealth}, {"leader", dep.Spec.Template.Spec.Containers[0], tc.leaderHealth}} {
				checkMetricsContainer(t, c.name, c.c, c.health, tc.secure, tc.certFile)
			}
			for _, r := range []struct {
				what string
				want bool
			}{
				{"kind: ClusterRole\nmetadata:\n  name: ovnedge-metrics-auth\n", tc.secure},
				{"kind: ClusterRoleBinding\nmetadata:\n  name: ovnedge-metrics-auth\n", tc.secure},
				{"kind: ClusterRole\nmetadata:\n  name: ovnedge-metrics-reader\n", tc.secure},
				{"kind: ValidatingAdmissionPolicy\n", tc.vapWant},
				{"kind: ValidatingAdmissionPolicyBinding\n", tc.vapWant},
			} {
				if got := strings.Contains(manifests, r.what); got != r.want {
					t.Errorf("rendering has %q: %v, want %v", r.what, got, r.want)
				}
			}
		})
	}
}

// checkMetricsContainer checks one container's metrics, health and probes.
func checkMetricsContainer(t *testing.T, name string, c corev1.Container, health int32, secure, certFile bool) {
	t.Helper()
	args := slices.Clone(c.Args[1:])
	for i := range args {
		args[i] = strings.ReplaceAll(args[i], "$(NODE_NAME)", "node-1")
	}
	cfg, _, err := daemon.ParseConfig("daemon", args)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if cfg.HealthAddr != fmt.Sprintf(":%d", health) || cfg.MetricsAddr == cfg.HealthAddr || cfg.MetricsSecure != secure ||
		(cfg.MetricsCertFile != "") != certFile || (cfg.MetricsKeyFile != "") != certFile {
		t.Errorf("%s: metrics %q health %q secure %v cert %q key %q; want health :%d, secure %v, cert file %v",
			name, cfg.MetricsAddr, cfg.HealthAddr, cfg.MetricsSecure, cfg.MetricsCertFile, cfg.MetricsKeyFile, health, secure, certFile)
	}
	for probe, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Port.IntVal != health || (p.HTTPGet.Scheme != "" && p.HTTPGet.Scheme != corev1.URISchemeHTTP) {
			t.Errorf("%s: %s probe %+v, want plain HTTP on %d", name, probe, p, health)
		}
	}
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "health" && p.ContainerPort == health }) {
		t.Errorf("%s: ports %+v, no health %d", name, c.Ports, health)
	}
	mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == "metrics-tls" && strings.HasPrefix(cfg.MetricsCertFile, m.MountPath+"/") && strings.HasPrefix(cfg.MetricsKeyFile, m.MountPath+"/")
	})
	if mounted != certFile {
		t.Errorf("%s: metrics certificate mounted %v, want %v (%+v)", name, mounted, certFile, c.VolumeMounts)
	}
}

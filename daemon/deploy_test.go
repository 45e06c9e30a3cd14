package daemon

import (
	"slices"
	"strings"
	"testing"

	"github.com/ovnedge/ovnedge/manifests"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestDeployManifests decodes every manifest of deploy/ strictly (an
// unknown field is an error), checks that each workload runs as an
// existing ServiceAccount, and that its arguments are flags ovnedge knows.
func TestDeployManifests(t *testing.T) {
	files, err := manifests.Load("../deploy")
	if err != nil {
		t.Fatal(err)
	}
	accounts := map[string]bool{}
	var pods []corev1.PodSpec
	kinds := map[string]int{}
	for path, objs := range files {
		for _, o := range objs {
			if u, ok := o.(*unstructured.Unstructured); ok {
				t.Errorf("%s: %s %s is not a built-in kind", path, u.GetKind(), u.GetName())
			}
			kinds[o.GetObjectKind().GroupVersionKind().Kind]++
			switch o := o.(type) {
			case *corev1.ServiceAccount:
				accounts[o.Namespace+"/"+o.Name] = true
			case *appsv1.DaemonSet:
				pods = append(pods, o.Spec.Template.Spec)
			case *appsv1.Deployment:
				pods = append(pods, o.Spec.Template.Spec)
			case *rbacv1.ClusterRole:
				for _, r := range o.Rules {
					for _, v := range r.Verbs {
						// The one exception: --enable-lb-svc deletes the
						// lb-svc Deployments of deleted Services, in any
						// namespace; nothing else, and never all at once.
						lbSvc := o.Name == "ovnedge-lb-svc" && v == "delete" &&
							slices.Equal(r.APIGroups, []string{"apps"}) && slices.Equal(r.Resources, []string{"deployments"})
						if v == "*" || v == "deletecollection" || (v == "delete" && !lbSvc) {
							t.Errorf("ClusterRole %s grants %q on %v: not least privilege", o.Name, v, r.Resources)
						}
						if slices.Contains(r.Resources, "*") || slices.Contains(r.APIGroups, "*") {
							t.Errorf("ClusterRole %s has a wildcard rule %+v", o.Name, r)
						}
					}
				}
			}
		}
	}
	for _, k := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "DaemonSet", "Deployment"} {
		if kinds[k] == 0 {
			t.Errorf("deploy/ has no %s", k)
		}
	}
	for _, p := range pods {
		if !accounts["kube-system/"+p.ServiceAccountName] {
			t.Errorf("ServiceAccount %s is not defined", p.ServiceAccountName)
		}
		for _, c := range p.Containers {
			// the image's binary, its daemon subcommand, then its flags
			argv := append(slices.Clone(c.Command), c.Args...)
			if len(argv) < 2 || argv[0] != "/usr/local/bin/ovnedge" || argv[1] != "daemon" {
				t.Errorf("container %s runs %q, want /usr/local/bin/ovnedge daemon ...", c.Name, argv)
				continue
			}
			args := strings.NewReplacer("$(NODE_NAME)", "node1").Replace(strings.Join(argv[2:], "\x00"))
			if _, _, err := ParseConfig("deploy", strings.Split(args, "\x00")); err != nil {
				t.Errorf("container %s: %v", c.Name, err)
			}
		}
	}
}

package v1_test

import (
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	egressv1 "github.com/ovnedge/ovnedge/egress/api/v1"
	"sigs.k8s.io/yaml"
)

// TestCRDMatchesTypes checks deploy/crds against the Go types: group, kind,
// scope, required fields, the JSON names of every field, and the printer
// columns `kubectl get eip` shows.
func TestCRDMatchesTypes(t *testing.T) {
	b, err := os.ReadFile("../../../deploy/crds/k8s.ovn.org_egressips.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	get := func(m any, path ...string) any {
		for _, p := range path {
			mm, ok := m.(map[string]any)
			if !ok {
				t.Fatalf("CRD: %s is not an object", strings.Join(path, "."))
			}
			m = mm[p]
		}
		return m
	}
	spec := get(crd, "spec")
	if g, k, s := get(spec, "group"), get(spec, "names", "kind"), get(spec, "scope"); g != egressv1.GroupName || k != egressv1.Kind || s != "Cluster" {
		t.Errorf("group/kind/scope = %v/%v/%v", g, k, s)
	}
	if p := get(spec, "names", "plural"); p != egressv1.Plural {
		t.Errorf("plural = %v", p)
	}
	v := get(spec, "versions").([]any)[0]
	var cols []string
	for _, c := range get(v, "additionalPrinterColumns").([]any) {
		cols = append(cols, get(c, "name").(string))
	}
	if want := []string{"EgressIPs", "Assigned Node", "Assigned EgressIPs"}; !slices.Equal(cols, want) {
		t.Errorf("printer columns = %q, want %q", cols, want)
	}
	schema := get(v, "schema", "openAPIV3Schema")
	specSchema := get(schema, "properties", "spec")
	if req := get(specSchema, "required"); !reflect.DeepEqual(req, []any{"egressIPs", "namespaceSelector"}) {
		t.Errorf("spec.required = %v", req)
	}
	if f := get(specSchema, "properties", "egressIPs", "items", "anyOf"); !reflect.DeepEqual(f, []any{map[string]any{"format": "ipv4"}, map[string]any{"format": "ipv6"}}) {
		t.Errorf("egressIPs item formats = %v", f)
	}
	for _, c := range []struct {
		schema any
		typ    reflect.Type
	}{
		{specSchema, reflect.TypeFor[egressv1.EgressIPSpec]()},
		{get(schema, "properties", "status"), reflect.TypeFor[egressv1.EgressIPStatus]()},
		{get(schema, "properties", "status", "properties", "items", "items"), reflect.TypeFor[egressv1.EgressIPStatusItem]()},
	} {
		var props []string
		for k := range get(c.schema, "properties").(map[string]any) {
			props = append(props, k)
		}
		var fields []string
		for f := range c.typ.Fields() {
			fields = append(fields, strings.Split(f.Tag.Get("json"), ",")[0])
		}
		slices.Sort(props)
		slices.Sort(fields)
		if !slices.Equal(props, fields) {
			t.Errorf("%s: CRD properties %q, Go fields %q", c.typ, props, fields)
		}
	}
}

// TestServiceCRDMatchesTypes checks deploy/crds' EgressService (OVN-
// Kubernetes' CRD as it ships it) against the Go types: group, kind,
// scope, the status subresource and the JSON names of every field.
func TestServiceCRDMatchesTypes(t *testing.T) {
	b, err := os.ReadFile("../../../deploy/crds/k8s.ovn.org_egressservices.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Group, Scope string
			Names        struct{ Kind, Plural string }
			Versions     []struct {
				Name         string
				Subresources map[string]any
				Schema       struct {
					OpenAPIV3Schema struct {
						Properties map[string]struct {
							Properties map[string]any
						}
					}
				}
			}
		}
	}
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	s := crd.Spec
	if s.Group != egressv1.GroupName || s.Names.Kind != egressv1.ServiceKind || s.Names.Plural != egressv1.ServicePlural || s.Scope != "Namespaced" {
		t.Errorf("group/kind/plural/scope = %s/%s/%s/%s", s.Group, s.Names.Kind, s.Names.Plural, s.Scope)
	}
	if len(s.Versions) != 1 || s.Versions[0].Name != "v1" || s.Versions[0].Subresources["status"] == nil {
		t.Fatalf("versions %+v: want v1 with a status subresource", s.Versions)
	}
	props := s.Versions[0].Schema.OpenAPIV3Schema.Properties
	for name, typ := range map[string]reflect.Type{"spec": reflect.TypeFor[egressv1.EgressServiceSpec](), "status": reflect.TypeFor[egressv1.EgressServiceStatus]()} {
		var fields []string
		for f := range typ.Fields() {
			fields = append(fields, strings.Split(f.Tag.Get("json"), ",")[0])
		}
		slices.Sort(fields)
		keys := slices.Sorted(maps.Keys(props[name].Properties))
		if !slices.Equal(keys, fields) {
			t.Errorf("%s: CRD properties %q, Go fields %q", name, keys, fields)
		}
	}
}

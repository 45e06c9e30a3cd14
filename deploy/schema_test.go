package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The schemas kubeconform reads, <group>/<kind>_<version>.json (the core
// group as v1/): the kind's definition with the definitions it refers to
// (transitively) under "definitions", so each file stands alone and
// recursive types still resolve. They are strict: an object with
// properties admits no other (as kubeconform's "-strict" schemas);
// int-or-string and quantities take a string or a number, as the API
// server does.

// writeKubeSchemas converts a Kubernetes swagger.json (OpenAPI v2) into
// kubeconform schemas under dir and returns how many kinds it wrote.
func writeKubeSchemas(swagger []byte, dir string) (int, error) {
	var doc struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(swagger, &doc); err != nil {
		return 0, fmt.Errorf("swagger.json: %w", err)
	}
	for name, def := range doc.Definitions {
		if strings.HasSuffix(name, ".util.intstr.IntOrString") || strings.HasSuffix(name, ".api.resource.Quantity") {
			doc.Definitions[name] = map[string]any{"description": def["description"],
				"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}}
			continue
		}
		strict(def)
	}
	n := 0
	for name, def := range doc.Definitions {
		gvks, _ := def["x-kubernetes-group-version-kind"].([]any)
		for _, g := range gvks {
			gvk, _ := g.(map[string]any)
			group, _ := gvk["group"].(string)
			version, _ := gvk["version"].(string)
			kind, _ := gvk["kind"].(string)
			closure := map[string]any{}
			refs(def, doc.Definitions, closure)
			schema := map[string]any{}
			for k, v := range def {
				schema[k] = v
			}
			schema["definitions"] = closure
			if err := writeSchema(dir, group, version, kind, schema); err != nil {
				return n, fmt.Errorf("%s: %w", name, err)
			}
			n++
		}
	}
	return n, nil
}

// refs adds the definitions v refers to, transitively, to closure.
func refs(v any, defs map[string]map[string]any, closure map[string]any) {
	switch v := v.(type) {
	case map[string]any:
		if ref, ok := v["$ref"].(string); ok {
			name := strings.TrimPrefix(ref, "#/definitions/")
			if _, seen := closure[name]; !seen {
				closure[name] = defs[name]
				refs(defs[name], defs, closure)
			}
		}
		for _, e := range v {
			refs(e, defs, closure)
		}
	case []any:
		for _, e := range v {
			refs(e, defs, closure)
		}
	}
}

// strict makes every object schema with properties in v admit no other
// property, and int-or-string schemas (x-kubernetes-int-or-string, format
// int-or-string) a string or an integer.
func strict(v any) {
	switch v := v.(type) {
	case map[string]any:
		if v["x-kubernetes-int-or-string"] == true || v["format"] == "int-or-string" {
			delete(v, "type")
			delete(v, "format")
			v["oneOf"] = []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}
		}
		if props, ok := v["properties"].(map[string]any); ok && v["additionalProperties"] == nil && v["x-kubernetes-preserve-unknown-fields"] != true {
			v["additionalProperties"] = false
			for _, p := range props {
				strict(p)
			}
		}
		for k, e := range v {
			if k != "properties" {
				strict(e)
			}
		}
	case []any:
		for _, e := range v {
			strict(e)
		}
	}
}

func writeSchema(dir, group, version, kind string, schema map[string]any) error {
	if group == "" {
		group = version
	}
	b, err := json.Marshal(schema)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, group, strings.ToLower(kind)+"_"+version+".json")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// crdSchemas writes the strict schema of every served version of the
// CRDs in files into dir (openapi2jsonschema.py's conversion, in Go).
func crdSchemas(t testing.TB, dir string, files []string) {
	t.Helper()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd struct {
			Spec struct {
				Group string
				Names struct{ Kind string }
				// Versions' schemas as plain maps: strict() edits them.
				Versions []struct {
					Name   string
					Served bool
					Schema struct {
						OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
					}
				}
			}
		}
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, v := range crd.Spec.Versions {
			s := v.Schema.OpenAPIV3Schema
			if !v.Served || s == nil {
				continue
			}
			strict(s)
			// metadata is the API server's: ObjectMeta, not the CRD's to
			// describe (usually `type: object`).
			if props, ok := s["properties"].(map[string]any); ok {
				props["apiVersion"] = map[string]any{"type": "string"}
				props["kind"] = map[string]any{"type": "string"}
				props["metadata"] = map[string]any{"type": "object"}
			}
			if err := writeSchema(dir, crd.Spec.Group, v.Name, crd.Spec.Names.Kind, s); err != nil {
				t.Fatal(err)
			}
		}
	}
}

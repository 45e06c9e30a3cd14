package manifests

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

// Error names the file and document of a manifest that could not
// be read.
type Error struct {
	File string
	Doc  int // 1-based document in the file
	Err  error
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: document %d: %v", e.File, e.Doc, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Load reads every *.yaml, *.yml and *.json file in dir (not
// recursively), each holding one or more Kubernetes objects separated by
// "---". Objects of built-in kinds decode to their typed Go structs (Node,
// Pod, Service, ...); others, such as EgressIP, to *unstructured.Unstructured.
//
// A file that cannot be read whole contributes nothing and its error is
// returned (joined with the others), so a caller can keep that file's
// previous objects; the other files' objects are returned.
func Load(dir string) (map[string][]runtime.Object, error) {
	return load(dir, nil)
}

// load is Load; reuse, when not nil, is asked first for
// each file and may return its objects without the file being read again.
func load(dir string, reuse func(path string, info fs.FileInfo) ([]runtime.Object, bool)) (map[string][]runtime.Object, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("manifests: %w", err)
	}
	out := map[string][]runtime.Object{}
	var errs []error
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if e.IsDir() || !slices.Contains([]string{".yaml", ".yml", ".json"}, ext) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if reuse != nil {
			if info, err := e.Info(); err == nil {
				if objs, ok := reuse(path, info); ok {
					out[path] = objs
					continue
				}
			}
		}
		objs, err := loadFile(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[path] = objs
	}
	return out, errors.Join(errs...)
}

func loadFile(path string) ([]runtime.Object, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("manifests: %w", err)
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []runtime.Object
	for doc := 1; ; doc++ {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); err != nil {
			if err == io.EOF {
				return objs, nil
			}
			return nil, &Error{File: path, Doc: doc, Err: err}
		}
		if len(u.Object) == 0 {
			continue // an empty document
		}
		obj, err := decodeObject(&u)
		if err != nil {
			return nil, &Error{File: path, Doc: doc, Err: err}
		}
		objs = append(objs, obj)
	}
}

// decodeObject turns a generic object into its typed form when the
// client-go scheme knows its kind.
func decodeObject(u *unstructured.Unstructured) (runtime.Object, error) {
	gvk := u.GroupVersionKind()
	if gvk.Kind == "" || gvk.Version == "" {
		return nil, fmt.Errorf("object without apiVersion/kind")
	}
	if u.GetName() == "" {
		return nil, fmt.Errorf("%s without metadata.name", gvk.Kind)
	}
	if !scheme.Scheme.Recognizes(gvk) {
		return u, nil
	}
	obj, err := scheme.Scheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", gvk, err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, obj, true); err != nil {
		return nil, fmt.Errorf("%s %s: %w", gvk.Kind, u.GetName(), err)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj, nil
}

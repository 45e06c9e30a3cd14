package deploy_test

import (
	"archive/tar"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// ociDescriptor is the part of an OCI descriptor the test reads.
type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Annotations map[string]string `json:"annotations"`
}

// ociConfig is the part of an OCI image config the test reads.
type ociConfig struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Config       struct {
		Entrypoint, Cmd, Env []string
		User                 string
		Labels               map[string]string
	} `json:"config"`
}

// readBlob decodes the JSON blob of digest in the layout at dir.
func readBlob(t *testing.T, dir, digest string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "blobs", strings.Replace(digest, ":", "/", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("blob %s: %v", digest, err)
	}
}

// TestImage builds the image as `make image` does and reads it back: one
// linux/amd64 manifest named by its tag, ovnedge as entrypoint, user
// 65532, the OCI labels, and a single layer holding only the static
// binary, which prints the version the image is tagged with.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the image (-short)")
	}
	out := t.TempDir()
	begin := time.Now()
	cmd := exec.Command("scripts/image.sh")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "IMAGE_OUT="+out, "IMAGE_REPO=example.org/ovnedge")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/image.sh: %v\n%s", err, b)
	}
	t.Logf("image built in %v", time.Since(begin).Round(time.Millisecond))
	tagData, err := os.ReadFile(filepath.Join(out, "tag"))
	if err != nil {
		t.Fatal(err)
	}
	tag := strings.TrimSpace(string(tagData))
	if ref, _ := os.ReadFile(filepath.Join(out, "ref")); strings.TrimSpace(string(ref)) != "example.org/ovnedge:"+tag {
		t.Errorf("ref %q, want example.org/ovnedge:%s", ref, tag)
	}
	if _, err := os.Stat(filepath.Join(out, "ovnedge.tar")); err != nil {
		t.Errorf("no layout archive: %v", err)
	}

	layout := filepath.Join(out, "oci")
	var index struct{ Manifests []ociDescriptor }
	readBlobFile(t, filepath.Join(layout, "index.json"), &index)
	if len(index.Manifests) != 1 {
		t.Fatalf("index.json: %d manifests, want 1", len(index.Manifests))
	}
	if got := index.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; got != tag {
		t.Errorf("index.json ref.name %q, want the tag %q", got, tag)
	}
	var manifest struct {
		Config ociDescriptor
		Layers []ociDescriptor
	}
	readBlob(t, layout, index.Manifests[0].Digest, &manifest)
	var cfg ociConfig
	readBlob(t, layout, manifest.Config.Digest, &cfg)
	c := cfg.Config
	if cfg.OS != "linux" || cfg.Architecture != "amd64" {
		t.Errorf("platform %s/%s, want linux/amd64", cfg.OS, cfg.Architecture)
	}
	if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/ovnedge"}) || !slices.Equal(c.Cmd, []string{"daemon"}) {
		t.Errorf("entrypoint %q cmd %q, want [/usr/local/bin/ovnedge] [daemon]", c.Entrypoint, c.Cmd)
	}
	if c.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (non-root)", c.User)
	}
	if !slices.Contains(c.Env, "PATH=/usr/local/bin") {
		t.Errorf("env %q: the lb-svc pods run `ovnedge lbsvc-agent` by name", c.Env)
	}
	version := c.Labels["org.opencontainers.image.version"]
	revision := c.Labels["org.opencontainers.image.revision"]
	if strings.ReplaceAll(version, "+", "_") != tag || len(revision) != 40 {
		t.Errorf("labels version %q revision %q, tag %q", version, revision, tag)
	}
	for _, l := range []string{"title", "source", "created", "description"} {
		if c.Labels["org.opencontainers.image."+l] == "" {
			t.Errorf("no label org.opencontainers.image.%s: %v", l, c.Labels)
		}
	}

	// The layer: only the binary, root-owned, static (no ELF interpreter:
	// an empty base has no dynamic loader).
	if len(manifest.Layers) != 1 {
		t.Fatalf("%d layers, want 1", len(manifest.Layers))
	}
	root := t.TempDir()
	files := extract(t, filepath.Join(layout, "blobs", strings.Replace(manifest.Layers[0].Digest, ":", "/", 1)), root)
	if !slices.Equal(files, []string{"usr/local/bin/ovnedge"}) {
		t.Errorf("layer files %q, want only usr/local/bin/ovnedge", files)
	}
	bin := filepath.Join(root, "usr/local/bin/ovnedge")
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 || slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP }) {
		t.Errorf("binary: machine %v, want a static x86-64 executable", f.Machine)
	}
	got, err := exec.Command(bin, "version").Output()
	if want := "ovnedge " + version + " " + revision; err != nil || strings.TrimSpace(string(got)) != want {
		t.Errorf("ovnedge version from the layer: %q, %v; want %q", got, err, want)
	}
}

func readBlobFile(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(data, v)
	}
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// extract unpacks the gzipped tar layer into dir and returns the regular
// files, checking each is root-owned and executable.
func extract(t *testing.T, layer, dir string) []string {
	t.Helper()
	f, err := os.Open(layer)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var files []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s owned by %d:%d, want root", h.Name, h.Uid, h.Gid)
		}
		name := filepath.Clean(h.Name)
		if h.Typeflag != tar.TypeReg {
			continue
		}
		files = append(files, name)
		if h.Mode&0o111 == 0 {
			t.Errorf("%s mode %o: not executable", name, h.Mode)
		}
		dst := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		w, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(w, tr); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

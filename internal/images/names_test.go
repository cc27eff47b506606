package images_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-dev/converge/internal/graph"
	"github.com/converge-dev/converge/internal/images"
	"github.com/converge-dev/converge/internal/testing/vmtest"
)

// versions the naming tests try: the default, a release, a pre-release.
var versions = []string{"dev", "v0.3.0", "v1.2.3-rc.1"}

// controllerContainer gives the container of the Deployment in objs, and
// the pod's securityContext.
func controllerContainer(t *testing.T, objs []*unstructured.Unstructured) (container, podSecurity map[string]any) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "Deployment" || o.GetName() != images.ControllerName {
			continue
		}
		cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		if len(cs) != 1 {
			t.Fatalf("Deployment %s has %d containers, want 1", o.GetName(), len(cs))
		}
		sc, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec", "securityContext")
		return cs[0].(map[string]any), sc
	}
	t.Fatalf("no Deployment %s among the %d rendered objects", images.ControllerName, len(objs))
	return nil, nil
}

// TestControllerReferenceMatchesBundle: what the controller bundle
// (components/controller) renders as the image for a version is exactly
// the tag the image is built with, and the pod runs as the image's user.
func TestControllerReferenceMatchesBundle(t *testing.T) {
	e, err := graph.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range versions {
		o := graph.DefaultControllerOptions()
		o.Version = v
		objs, err := e.RenderController(o)
		if err != nil {
			t.Fatal(err)
		}
		c, sc := controllerContainer(t, objs)
		if got, want := c["image"], images.ControllerReference(v); got != want {
			t.Errorf("version %s: the bundle's image is %v, make images tags %s", v, got, want)
		}
		if _, err := name.NewTag(images.ControllerReference(v), name.StrictValidation); err != nil {
			t.Errorf("version %s: %v", v, err)
		}
		if _, err := name.NewTag(images.NodeReference(v), name.StrictValidation); err != nil {
			t.Errorf("version %s: %v", v, err)
		}
		for _, k := range []string{"runAsUser", "runAsGroup"} {
			if got, ok := sc[k].(int64); !ok || got != images.NonrootUID {
				t.Errorf("the Deployment's %s is %v; the controller image's user is %d", k, sc[k], images.NonrootUID)
			}
		}
	}
}

// TestCLIRendersTheImageTag builds the converge CLI with the flags `make
// build` gives it (images.LDFlags) and checks that `converge version`
// prints the version and `converge render --controller` names exactly
// the tag `make images` writes.
func TestCLIRendersTheImageTag(t *testing.T) {
	const v = "v0.0.0-tagcheck"
	cli := filepath.Join(t.TempDir(), "converge")
	build := exec.Command("go", "build", "-ldflags", images.LDFlags(v), "-o", cli, "./cmd/converge")
	build.Dir = vmtest.RepoRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if got, err := images.BinaryVersion(cli); err != nil || got != v {
		t.Errorf("BinaryVersion = %q, %v; want %q", got, err, v)
	}
	out, err := exec.Command(cli, "version").Output()
	if err != nil || strings.TrimSpace(string(out)) != "converge "+v {
		t.Errorf("converge version: %q, %v; want %q", out, err, "converge "+v)
	}
	out, err = exec.Command(cli, "render", "--controller", "-o", "json").Output()
	if err != nil {
		t.Fatalf("converge render --controller: %v", err)
	}
	var list struct{ Items []map[string]any }
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, o := range list.Items {
		objs = append(objs, &unstructured.Unstructured{Object: o})
	}
	c, _ := controllerContainer(t, objs)
	if got, want := c["image"], images.ControllerReference(v); got != want {
		t.Errorf("converge render --controller names %v, make images writes %s", got, want)
	}
}

// TestMakefileVersionFlags: `make build` gives every go build the same
// -ldflags as images.LDFlags and -tags images.BuildTags, builds converge-controller without cgo, and
// `make images` passes VERSION to hack/images.
func TestMakefileVersionFlags(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not found")
	}
	const v = "v9.9.9-make"
	cmd := exec.Command("make", "-n", "-B", "build", "images", "VERSION="+v)
	cmd.Dir = vmtest.RepoRoot(t)
	cmd.Env = append(os.Environ(), "MAKEFLAGS=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("make -n build images: %v\n%s", err, out)
	}
	builds := regexp.MustCompile(`(?m)^.*\bgo build .*-o \S*/bin/(converge\S*) .*$`).FindAllStringSubmatch(string(out), -1)
	seen := map[string]bool{}
	for _, m := range builds {
		seen[m[1]] = true
		if !strings.Contains(m[0], `-ldflags "`+images.LDFlags(v)+`"`) {
			t.Errorf("make build: %q lacks -ldflags %q", m[0], images.LDFlags(v))
		}
		if !strings.Contains(m[0], " -tags "+images.BuildTags+" ") {
			t.Errorf("make build: %q lacks -tags %s", m[0], images.BuildTags)
		}
		if m[1] == images.ControllerName && !strings.HasPrefix(m[0], "CGO_ENABLED=0 ") {
			t.Errorf("make build: %q: converge-controller is built with CGO_ENABLED=0, as in its image", m[0])
		}
	}
	for _, b := range []string{"converge", images.ControllerName, images.NodeName, "converge-demo"} {
		if !seen[b] {
			t.Errorf("make -n build shows no go build of bin/%s:\n%s", b, out)
		}
	}
	if !strings.Contains(string(out), `go run ./hack/images -version "`+v+`"`) {
		t.Errorf("make -n images does not run hack/images with -version %q:\n%s", v, out)
	}
}

// TestBinaryVersion reads the version from the -ldflags a binary's build
// information records.
func TestBinaryVersion(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, ldflags, want string
	}{
		{"no flags", "", images.DefaultVersion},
		{"LDFlags", images.LDFlags("v1.0.0"), "v1.0.0"},
		{"-X= and others", "-s -w -X=" + images.VersionVariable + "=v2.0.0", "v2.0.0"},
		{"another variable", "-X main.Version=v3", images.DefaultVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			cmd := exec.Command("go", "build", "-ldflags", tc.ldflags, "-o", bin, "./testdata/tiny")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("go build: %v\n%s", err, out)
			}
			if got, err := images.BinaryVersion(bin); err != nil || got != tc.want {
				t.Errorf("BinaryVersion = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	notGo := filepath.Join(dir, "script")
	if err := os.WriteFile(notGo, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := images.BinaryVersion(notGo); err == nil || !strings.Contains(err.Error(), notGo+": reading Go build information") {
		t.Errorf("BinaryVersion of a script: %v", err)
	}
}

// TestFetchUnreachable: a mirror that cannot be reached is
// ErrAptUnreachable (the image tests skip on it), naming apt's error.
func TestFetchUnreachable(t *testing.T) {
	if _, err := exec.LookPath("apt-get"); err != nil {
		t.Skip("apt-get not found")
	}
	o := images.DefaultAptOptions(t.TempDir())
	o.Sources = "deb [trusted=yes] http://127.0.0.1:9/debian bookworm main\n"
	_, err := images.Fetch(context.Background(), o, "qemu-utils")
	if !errors.Is(err, images.ErrAptUnreachable) || !strings.Contains(err.Error(), "apt-get update") || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("Fetch from an unreachable mirror: %v; want ErrAptUnreachable naming apt-get update and the mirror", err)
	}
}

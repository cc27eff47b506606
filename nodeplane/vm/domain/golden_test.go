package domain_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pmezard/go-difflib/difflib"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/api/vmisupport"
	"github.com/converge-dev/converge/nodeplane/vm/domain"
	"github.com/converge-dev/converge/nodeplane/vm/vmdisks"
)

var update = flag.Bool("update", os.Getenv("UPDATE_GOLDEN") == "1", "rewrite golden files")

const goldenDir = "../../../testdata/domain"

// testOptions are the node choices of the golden cases: the default
// options plus a serial log directory and resolvers for PVCs, bridges
// and the volumes the node prepares (vmdisks, state /var/lib/converge/vm;
// its Secret and ConfigMap getters are never called by Build).
func testOptions() domain.Options {
	o := domain.DefaultOptions()
	o.SerialLogDir = "/var/log/converge/vm"
	o.ResolvePVC = func(namespace, claim string) (domain.DiskSource, error) {
		switch claim {
		case "missing":
			return domain.DiskSource{}, fmt.Errorf("PersistentVolumeClaim %s/%s not found", namespace, claim)
		case "raw-block":
			return domain.DiskSource{Path: "/dev/converge/" + namespace + "/" + claim, Block: true}, nil
		}
		return domain.DiskSource{Path: "/var/lib/converge/pvc/" + namespace + "/" + claim + "/disk.img"}, nil
	}
	o.ResolveBridge = func(namespace string, n kubevirtv1.Network) (string, error) {
		switch {
		case n.Pod != nil:
			return "cvbr0", nil
		case n.Multus != nil && n.Multus.NetworkName == "nowhere":
			return "", fmt.Errorf("NetworkAttachmentDefinition %s/nowhere not found", namespace)
		case n.Multus != nil:
			return "br-" + n.Multus.NetworkName, nil
		}
		return "", fmt.Errorf("no source")
	}
	do := vmdisks.DefaultOptions("/var/lib/converge/vm")
	unread := func(context.Context, string, string) (map[string][]byte, error) {
		return nil, fmt.Errorf("Build reads no object")
	}
	do.Secrets, do.ConfigMaps = unread, unread
	disks, err := vmdisks.New(do)
	if err != nil {
		panic(err)
	}
	o.ResolveVolume = disks.Resolve // paths only: Resolve reads and writes nothing
	o.ResolveTap = func(namespace string, n kubevirtv1.Network) (domain.Tap, bool, error) {
		if n.Multus != nil && strings.HasPrefix(n.Multus.NetworkName, "tap-") {
			return domain.Tap{Name: "cvt6d1f3a52-1", MTU: 1400}, true, nil
		}
		return domain.Tap{}, false, nil
	}
	return o
}

// readVMI decodes testdata/domain/<name>.yaml strictly: a misspelt field
// fails the test instead of vanishing.
func readVMI(t *testing.T, path string) *kubevirtv1.VirtualMachineInstance {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	vmi, err := domain.DecodeVMI(raw)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return vmi
}

// TestBuildGolden translates every testdata/domain/<case>.yaml and compares
// with <case>.xml (a domain) or <case>.err (the expected error message).
// UPDATE_GOLDEN=1 rewrites them.
func TestBuildGolden(t *testing.T) {
	cases, err := filepath.Glob(filepath.Join(goldenDir, "*.yaml"))
	if err != nil || len(cases) == 0 {
		t.Fatalf("no cases in %s: %v", goldenDir, err)
	}
	for _, c := range cases {
		name := strings.TrimSuffix(filepath.Base(c), ".yaml")
		t.Run(name, func(t *testing.T) {
			vmi := readVMI(t, c)
			opts := testOptions()
			d, err := domain.Build(vmi, opts)
			var got []byte
			var golden string
			if strings.HasPrefix(name, "err-") {
				golden = strings.TrimSuffix(c, ".yaml") + ".err"
				if err == nil {
					t.Fatalf("Build succeeded; expected an error")
				}
				var fe vmisupport.FieldErrors
				if !errors.As(err, &fe) || len(fe) == 0 {
					t.Errorf("error %v does not wrap FieldErrors", err)
				}
				got = []byte(strings.ReplaceAll(err.Error(), "; ", ";\n") + "\n")
			} else {
				golden = strings.TrimSuffix(c, ".yaml") + ".xml"
				if err != nil {
					t.Fatalf("Build: %v", err)
				}
				s, err := d.Marshal()
				if err != nil {
					t.Fatalf("Marshal: %v", err)
				}
				got = []byte(s + "\n")
			}
			compareGolden(t, golden, got)
		})
	}
}

func compareGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with UPDATE_GOLDEN=1 to create it)", err)
	}
	if !bytes.Equal(got, want) {
		diff, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
			A: difflib.SplitLines(string(want)), B: difflib.SplitLines(string(got)),
			FromFile: path, ToFile: "got", Context: 3,
		})
		t.Errorf("%s differs (UPDATE_GOLDEN=1 rewrites it):\n%s", path, diff)
	}
}

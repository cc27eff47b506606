package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestApplyDiff drives `converge apply` and `converge diff` against a real
// kube-apiserver through a kubeconfig, as a user would.
func TestApplyDiff(t *testing.T) {
	_, kubeconfig := cliEnv(t)
	config := exampleConfig(t)
	run := runner(kubeconfig)
	rows := func(out, action string) int { return strings.Count(out, " "+action+"\n") }

	// As kubectl diff: exit 1 with differences, 0 without, 2 on an error.
	out, code := run("diff", config)
	if code != 1 || !strings.Contains(out, "+++ desired/KubeVirt/kubevirt-hyperconverged/kubevirt-kubevirt-hyperconverged") {
		t.Fatalf("diff before apply (exit %d, want 1) does not show the KubeVirt to create:\n%s", code, out)
	}
	// The CLI's errors start a line with "error:"; CRD schemas in the diff
	// carry indented `error:` fields (VolumeSnapshot's status), which are not.
	if regexp.MustCompile(`(?m)^error:`).MatchString(out) {
		t.Errorf("diff with differences printed an error:\n%s", out)
	}

	out, code = run("apply", "--revision", "r1", config)
	if code != 0 {
		t.Fatalf("apply exit %d:\n%s", code, out)
	}
	if n := rows(out, "created"); n != 33 {
		t.Errorf("first apply created %d objects, want 33 (25 CRDs, Namespace, HyperConverged, PriorityClass, KubeVirt, CDI, NetworkAddonsConfig, HostPathProvisioner, SSP: native mode derives the SSP on plain Kubernetes too, and no MigController or FileRestoreOperator)\n%s", n, out)
	}
	if !strings.Contains(out, "Available          False") || !strings.Contains(out, "resource has no conditions") {
		t.Errorf("apply output lacks the HC conditions:\n%s", out)
	}

	out, code = run("diff", config)
	if code != 0 || strings.TrimSpace(out) != "no changes" {
		t.Errorf("diff after apply (exit %d) = %q, want no changes", code, out)
	}

	b, err := os.ReadFile(filepath.Join(config, "hyperconverged.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte("uninstallStrategy: BlockUninstallIfWorkloadsExist"), []byte("uninstallStrategy: RemoveWorkloads"), 1)
	if err := os.WriteFile(filepath.Join(config, "hyperconverged.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, code = run("diff", config)
	if code != 1 {
		t.Errorf("diff of a changed config exit %d, want 1", code)
	}
	if !strings.Contains(out, "+  uninstallStrategy: RemoveWorkloads") || !strings.Contains(out, "-  uninstallStrategy: BlockUninstallIfWorkloadsExist") {
		t.Errorf("diff does not show the uninstallStrategy change:\n%s", out)
	}
	out, code = run("apply", config)
	if code != 0 {
		t.Fatalf("second apply exit %d:\n%s", code, out)
	}
	if n := rows(out, "configured"); n != 3 { // HC, KubeVirt, CDI
		t.Errorf("second apply configured %d objects, want 3 (HyperConverged, KubeVirt, CDI):\n%s", n, out)
	}

	// Bad input: exit 1 and nothing applied.
	if err := os.WriteFile(filepath.Join(config, "hyperconverged.yaml"), bytes.Replace(b, []byte("RemoveWorkloads"), []byte("Nope"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code = run("apply", config)
	if code != 1 || !strings.Contains(out, "spec.uninstallStrategy") || strings.Contains(out, "ACTION") {
		t.Errorf("apply of a bad config: exit %d, want 1 with an error naming spec.uninstallStrategy and no inventory:\n%s", code, out)
	}
	out, code = run("diff", config)
	if code != 2 || !strings.Contains(out, "error:") || !strings.Contains(out, "spec.uninstallStrategy") {
		t.Errorf("diff of a bad config: exit %d, want 2 (kubectl diff's error code) with the error:\n%s", code, out)
	}
}

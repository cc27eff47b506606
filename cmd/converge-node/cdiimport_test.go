package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestCDIImporterFlags runs `converge-node cdi-importer` with bad flags:
// each fails before any API call, with an error naming the problem.
func TestCDIImporterFlags(t *testing.T) {
	dir := t.TempDir()
	pool := "local=" + filepath.Join(dir, "pool")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing node name", []string{"--storage-pool", pool}, "--node-name: required"},
		{"no pool", []string{"--node-name", "n1"}, "at least one NAME=PATH"},
		{"pool without =", []string{"--node-name", "n1", "--storage-pool", "/var/hpvolumes"}, `storage pool "/var/hpvolumes": want NAME=PATH`},
		{"pool relative path", []string{"--node-name", "n1", "--storage-pool", "local=pool"}, "must be an absolute, clean path"},
		{"missing kubeconfig", []string{"--node-name", "n1", "--storage-pool", pool, "--kubeconfig", "/nonexistent/kubeconfig"}, `cdi-importer: kubeconfig "/nonexistent/kubeconfig"`},
		{"argument", []string{"extra"}, "unknown command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := newRoot()
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&out)
			root.SetArgs(append([]string{"cdi-importer"}, tc.args...))
			err := root.Execute()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("cdi-importer %q: error %v, want one containing %q", tc.args, err, tc.want)
			}
		})
	}
}

package main

import (
	"context"
	"io"
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
		{"upload bind without port", []string{"--node-name", "n1", "--storage-pool", pool, "--upload-bind-address", "0.0.0.0"}, `--upload-bind-address "0.0.0.0": expected host:port`},
		{"upload advertise without port", []string{"--node-name", "n1", "--storage-pool", pool, "--upload-advertise-address", "10.0.0.1"}, `--upload-advertise-address "10.0.0.1": expected host:port`},
		{"upload keys namespace empty", []string{"--node-name", "n1", "--storage-pool", pool, "--upload-keys-namespace", ""}, "--upload-keys-namespace: required"},
		{"uploads disabled skip their checks", []string{"--node-name", "n1", "--storage-pool", pool, "--upload-bind-address", "", "--upload-advertise-address", "x", "--kubeconfig", "/nonexistent/kubeconfig"}, `cdi-importer: kubeconfig "/nonexistent/kubeconfig"`},
		{"argument", []string{"extra"}, "unknown command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := execute(context.Background(), io.Discard, append([]string{"cdi-importer"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("cdi-importer %q: error %v, want one containing %q", tc.args, err, tc.want)
			}
		})
	}
}

// TestCDIImporterUploadFlagDefaults checks the upload server's flags and
// their defaults: on at :8187, keys in converge-system.
func TestCDIImporterUploadFlagDefaults(t *testing.T) {
	cmd := newCDIImportCommand()
	for flag, want := range map[string]string{"upload-bind-address": ":8187", "upload-advertise-address": "", "upload-keys-namespace": "converge-system"} {
		f := cmd.Flags().Lookup(flag)
		if f == nil || f.DefValue != want {
			t.Errorf("--%s: %+v, want default %q", flag, f, want)
		}
	}
	if !strings.Contains(cmd.Long, "--upload-bind-address") || !strings.Contains(cmd.Long, "image-upload") {
		t.Errorf("Long help does not describe the upload server")
	}
}

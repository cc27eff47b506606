package cniplugins_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/converge-dev/converge/nodeplane/network/cniplugins"
)

const versionFlag = "-X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion="

var pluginPkgs = map[string]string{
	"bridge":     "github.com/containernetworking/plugins/plugins/main/bridge",
	"host-local": "github.com/containernetworking/plugins/plugins/ipam/host-local",
	"loopback":   "github.com/containernetworking/plugins/plugins/main/loopback",
}

// buildPlugins builds the named plugins from the module's pinned
// containernetworking/plugins into dir, stating version (the build
// recipe of `make cni`).
func buildPlugins(t *testing.T, dir, version string, names ...string) {
	t.Helper()
	args := []string{"build", "-ldflags", versionFlag + version, "-o", dir + "/"}
	for _, n := range names {
		args = append(args, pluginPkgs[n])
	}
	start := time.Now()
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("built %v (%s) in %s", names, version, time.Since(start).Round(time.Millisecond))
}

type fileState struct {
	ino   uint64
	mtime time.Time
	data  []byte
}

// snapshot gives every file of dir with its inode, mtime and content.
func snapshot(t *testing.T, dir string) map[string]fileState {
	t.Helper()
	out := map[string]fileState{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(p)
		out[e.Name()] = fileState{ino: fi.Sys().(*syscall.Stat_t).Ino, mtime: fi.ModTime(), data: data}
	}
	return out
}

func TestInstall(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	buildPlugins(t, src, "v1.9.1", "bridge", "host-local", "loopback")
	dest := filepath.Join(t.TempDir(), "opt", "cni", "bin")
	o := cniplugins.InstallOptions{Source: src, Dest: dest, Plugins: cniplugins.DefaultPlugins}

	res, err := cniplugins.Install(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if !r.Installed || r.Version != "v1.9.1" || r.Previous != "" {
			t.Errorf("first install of %s: %+v, want installed v1.9.1 over nothing", r.Name, r)
		}
		if v, err := cniplugins.Version(ctx, r.Path, time.Second); err != nil || v != "v1.9.1" {
			t.Errorf("installed %s states %q, %v", r.Path, v, err)
		}
	}
	first := snapshot(t, dest)
	if len(first) != 3 {
		t.Fatalf("dest holds %d files, want the 3 plugins and nothing else", len(first))
	}

	t.Run("second run is a no-op", func(t *testing.T) {
		res, err := cniplugins.Install(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Installed || r.Previous != "v1.9.1" {
				t.Errorf("%s: %+v, want left alone", r.Name, r)
			}
		}
		for name, was := range snapshot(t, dest) {
			if f := first[name]; f.ino != was.ino || !f.mtime.Equal(was.mtime) {
				t.Errorf("%s was rewritten (inode %d→%d, mtime %s→%s)", name, f.ino, was.ino, f.mtime, was.mtime)
			}
		}
	})

	t.Run("a different version replaces only that plugin", func(t *testing.T) {
		src2 := t.TempDir()
		buildPlugins(t, src2, "v1.9.1-converge.1", "bridge")
		for _, n := range []string{"host-local", "loopback"} {
			b, _ := os.ReadFile(filepath.Join(src, n))
			if err := os.WriteFile(filepath.Join(src2, n), b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		res, err := cniplugins.Install(ctx, cniplugins.InstallOptions{Source: src2, Dest: dest})
		if err != nil {
			t.Fatal(err)
		}
		if r := res[0]; !r.Installed || r.Version != "v1.9.1-converge.1" || r.Previous != "v1.9.1" {
			t.Errorf("bridge: %+v, want v1.9.1 replaced by v1.9.1-converge.1", r)
		}
		for _, r := range res[1:] {
			if r.Installed {
				t.Errorf("%s was reinstalled at the same version", r.Name)
			}
		}
		now := snapshot(t, dest)
		if len(now) != 3 {
			t.Errorf("dest holds %d files after the update (a temporary file left?)", len(now))
		}
		want, _ := os.ReadFile(filepath.Join(src2, "bridge"))
		if b := now["bridge"]; b.ino == first["bridge"].ino || !bytes.Equal(b.data, want) {
			t.Error("bridge was not replaced by a renamed new file with the new content")
		}
		first = now
	})

	t.Run("source and dest the same directory are refused", func(t *testing.T) {
		link := filepath.Join(t.TempDir(), "bin")
		if err := os.Symlink(dest, link); err != nil {
			t.Fatal(err)
		}
		for _, src := range []string{dest, link} {
			_, err := cniplugins.Install(ctx, cniplugins.InstallOptions{Source: src, Dest: dest})
			if err == nil || !strings.Contains(err.Error(), "are the same directory, nothing installed") {
				t.Errorf("Install from %s into %s: %v, want a refusal", src, dest, err)
			}
		}
	})

	t.Run("a broken source is refused without touching dest", func(t *testing.T) {
		for _, c := range []struct {
			name   string
			break_ func(dir string)
			want   string
		}{
			{"missing plugin", func(d string) { os.Remove(filepath.Join(d, "loopback")) }, "loopback"},
			{"not executable", func(d string) { os.Chmod(filepath.Join(d, "host-local"), 0o644) }, "not an executable file"},
			{"truncated binary", func(d string) {
				b, _ := os.ReadFile(filepath.Join(d, "bridge"))
				os.WriteFile(filepath.Join(d, "bridge"), b[:4096], 0o755)
			}, "it ended with"},
			{"not a CNI plugin", func(d string) {
				os.WriteFile(filepath.Join(d, "loopback"), []byte("#!/bin/sh\necho hello >&2\n"), 0o755)
			}, `want a "CNI <name> plugin <version>" line`},
		} {
			t.Run(c.name, func(t *testing.T) {
				bad := t.TempDir()
				for _, n := range cniplugins.DefaultPlugins {
					b, _ := os.ReadFile(filepath.Join(src, n))
					os.WriteFile(filepath.Join(bad, n), b, 0o755)
				}
				// A version that differs, so that a good source would be installed.
				buildPlugins(t, bad, "v9.9.9", "bridge")
				c.break_(bad)
				_, err := cniplugins.Install(ctx, cniplugins.InstallOptions{Source: bad, Dest: dest})
				if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "nothing installed") {
					t.Fatalf("Install = %v, want a refusal with %q", err, c.want)
				}
				t.Logf("refused: %v", err)
				for name, was := range snapshot(t, dest) {
					if f := first[name]; f.ino != was.ino || !bytes.Equal(f.data, was.data) {
						t.Errorf("%s in dest was changed", name)
					}
				}
			})
		}
	})
}

// TestDefaultInstallOptions: the running test binary has no cni
// directory beside it, so the source is the image's /opt/cni/bin.
func TestDefaultInstallOptions(t *testing.T) {
	o := cniplugins.DefaultInstallOptions()
	if o.Source != cniplugins.ImageSource || o.Dest != "/opt/cni/bin" {
		t.Errorf("DefaultInstallOptions = %+v, want source %s (no cni beside the executable) and dest /opt/cni/bin", o, cniplugins.ImageSource)
	}
}

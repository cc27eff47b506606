package config

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"cuelang.org/go/cue/cuecontext"
)

// TestLoadStaysInside loads directories a hostile repository could hold:
// Load never reads outside the directory it loads, reads regular files
// only and bounds what it reads. Each refusal names the file (relative to
// the test's directory here) and why.
func TestLoadStaysInside(t *testing.T) {
	ctx := cuecontext.New()
	big := strings.Repeat("#", MaxFileBytes)
	for _, tc := range []struct {
		name string
		// setup builds the config in dir (the test's directory is its
		// parent, holding outside.yaml) and gives the path to load.
		setup func(t *testing.T, dir string) string
		// want is the error, with the test's directory cut; "" to load.
		want string
	}{
		{name: "absolute link out", setup: func(t *testing.T, dir string) string {
			symlink(t, "/etc/passwd", filepath.Join(dir, "x.yaml"))
			return dir
		}, want: `cfg/x.yaml: symbolic link to "/etc/passwd" is refused: a config is read only from inside its directory, and a link may not lead out of it (statat x.yaml: path escapes from parent)`},
		{name: "link to a device", setup: func(t *testing.T, dir string) string {
			symlink(t, "/dev/zero", filepath.Join(dir, "zero.yaml"))
			return dir
		}, want: `cfg/zero.yaml: symbolic link to "/dev/zero" is refused: a config is read only from inside its directory, and a link may not lead out of it (statat zero.yaml: path escapes from parent)`},
		{name: "relative link out", setup: func(t *testing.T, dir string) string {
			symlink(t, "../outside.yaml", filepath.Join(dir, "x.yaml"))
			return dir
		}, want: `cfg/x.yaml: symbolic link to "../outside.yaml" is refused`},
		{name: "link out and back in", setup: func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "sub", "vm.yaml"), vm)
			symlink(t, "../cfg/sub/vm.yaml", filepath.Join(dir, "x.yaml"))
			return dir
		}, want: `cfg/x.yaml: symbolic link to "../cfg/sub/vm.yaml" is refused`},
		{name: "the named file links out", setup: func(t *testing.T, dir string) string {
			symlink(t, "../outside.yaml", filepath.Join(dir, "x.yaml"))
			return filepath.Join(dir, "x.yaml")
		}, want: `cfg/x.yaml: symbolic link to "../outside.yaml" is refused`},
		{name: "link inside", setup: func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "sub", "vm.txt"), vm)
			symlink(t, "sub/vm.txt", filepath.Join(dir, "x.yaml"))
			return dir
		}},
		{name: "dangling link", setup: func(t *testing.T, dir string) string {
			symlink(t, "nothing.yaml", filepath.Join(dir, "x.yaml"))
			return dir
		}, want: `cfg/x.yaml: symbolic link to "nothing.yaml" leads to nothing`},
		{name: "a directory named like a file is skipped", setup: func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "d.yaml", "vm.yaml"), "not: [read")
			write(t, filepath.Join(dir, "vm.yaml"), vm)
			return dir
		}},
		{name: "named pipe", setup: func(t *testing.T, dir string) string {
			if err := syscall.Mkfifo(filepath.Join(dir, "p.yaml"), 0o644); err != nil {
				t.Skip(err)
			}
			return dir
		}, want: `cfg/p.yaml: a named pipe (FIFO), not a regular file: a config is read from regular files only`},
		{name: "socket", setup: func(t *testing.T, dir string) string {
			l, err := net.Listen("unix", filepath.Join(dir, "s.yaml"))
			if err != nil {
				t.Skip(err)
			}
			t.Cleanup(func() { l.Close() })
			return dir
		}, want: `cfg/s.yaml: a socket, not a regular file: a config is read from regular files only`},
		{name: "a device named as the config", setup: func(t *testing.T, dir string) string {
			return "/dev/zero"
		}, want: `/dev/zero: a character device, not a regular file: a config is read from regular files only`},
		{name: "file of MaxFileBytes", setup: func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "vm.yaml"), vm+big[len(vm):])
			return dir
		}},
		{name: "file above MaxFileBytes", setup: func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "vm.yaml"), vm+big[len(vm)-1:])
			return dir
		}, want: `cfg/vm.yaml: larger than 8388608 bytes (MaxFileBytes); a config file holds a few manifests`},
		{name: "files above MaxConfigBytes together", setup: func(t *testing.T, dir string) string {
			for _, n := range []string{"a", "b", "c", "d", "e"} {
				write(t, filepath.Join(dir, n+".yaml"), big[:MaxConfigBytes/4-1])
			}
			return dir
		}, want: `cfg/e.yaml: the config's files exceed 33554432 bytes (MaxConfigBytes) together; a config is a handful of manifests`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			top := t.TempDir()
			write(t, filepath.Join(top, "outside.yaml"), vm)
			dir := filepath.Join(top, "cfg")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			path := tc.setup(t, dir)
			done := make(chan struct{})
			var err error
			var cfg *Config
			go func() {
				defer close(done)
				cfg, err = LoadDocuments(ctx, path)
			}()
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatal("LoadDocuments did not return")
			}
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if len(cfg.Workloads) != 1 {
					t.Errorf("%d workloads, want the VM", len(cfg.Workloads))
				}
				return
			}
			if err == nil {
				t.Fatalf("loaded; want %s", tc.want)
			}
			if got := strings.ReplaceAll(err.Error(), top+"/", ""); !strings.HasPrefix(got, tc.want) {
				t.Errorf("error:\n%s\nwant one starting:\n%s", got, tc.want)
			}
		})
	}
}

const vm = `apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: a}
`

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

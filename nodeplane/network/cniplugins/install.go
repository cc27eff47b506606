// Package cniplugins is the node role cluster-network-addons-operator gives
// kube-cni-linux-bridge-plugin: Install puts the CNI plugins
// (containernetworking/plugins, built with the project) into a node's CNI
// bin directory (`converge-node cni-install`).
package cniplugins

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"time"
)

// pluginsModule is the module the plugin binaries are built from.
const pluginsModule = "github.com/containernetworking/plugins"

// DefaultPlugins are the plugins a VM NIC on a Linux bridge needs: bridge,
// its IPAM host-local, and loopback.
var DefaultPlugins = []string{"bridge", "host-local", "loopback"}

// InstallOptions configure Install.
type InstallOptions struct {
	// Source is the directory holding the built plugins (bin/cni).
	Source string
	// Dest is the node's CNI bin directory (/opt/cni/bin); created if
	// absent.
	Dest string
	// Plugins are the binary names to install.
	Plugins []string
	// Timeout bounds each run of a plugin to read its version.
	Timeout time.Duration
}

// ImageSource is where the converge-node image holds the plugins.
const ImageSource = "/opt/cni/bin"

// DefaultInstallOptions gives Source cni next to the running executable
// when that directory exists (bin/converge-node beside bin/cni in a
// checkout), else ImageSource (the image: /usr/bin/converge-node with the
// plugins in /opt/cni/bin); Dest /opt/cni/bin, DefaultPlugins and a 10 s
// timeout. In the image Source and Dest are then the same directory,
// which Install refuses: mount the host's CNI bin directory elsewhere
// (/host/opt/cni/bin) and pass it as Dest.
func DefaultInstallOptions() InstallOptions {
	src := ImageSource
	if exe, err := os.Executable(); err == nil {
		if st, err := os.Stat(filepath.Join(filepath.Dir(exe), "cni")); err == nil && st.IsDir() {
			src = filepath.Join(filepath.Dir(exe), "cni")
		}
	}
	return InstallOptions{Source: src, Dest: "/opt/cni/bin", Plugins: DefaultPlugins, Timeout: 10 * time.Second}
}

// PluginResult is what Install did with one plugin.
type PluginResult struct {
	// Name is the plugin's binary name.
	Name string
	// Version is the source's version (Version).
	Version string
	// Previous is the version that was in Dest ("" when none or
	// unreadable).
	Previous string
	// Installed is true when the binary was written, false when Dest
	// already had Version.
	Installed bool
	// Path is the plugin's path in Dest.
	Path string
}

// Install takes options and installs each plugin whose version in Dest
// differs from the one in Source: the binary is copied to a temporary
// file in Dest, made executable, fsynced and renamed over the old one
// (then the directory is fsynced), so a runtime calling the plugin sees
// the old or the new binary, never a partial one. Every source plugin is
// checked first (present, runnable, with a readable version): a broken
// source is refused before Dest is touched. It gives one result per
// plugin, in order.
func Install(ctx context.Context, o InstallOptions) ([]PluginResult, error) {
	if o.Timeout <= 0 {
		o.Timeout = DefaultInstallOptions().Timeout
	}
	if len(o.Plugins) == 0 {
		o.Plugins = DefaultPlugins
	}
	if sameDir(o.Source, o.Dest) {
		return nil, fmt.Errorf("source %s and destination %s are the same directory, nothing installed: in a container, mount the host's CNI bin directory elsewhere (such as /host/opt/cni/bin) and pass it as the destination", o.Source, o.Dest)
	}
	results := make([]PluginResult, len(o.Plugins))
	for i, name := range o.Plugins {
		src := filepath.Join(o.Source, name)
		v, err := Version(ctx, src, o.Timeout)
		if err != nil {
			return nil, fmt.Errorf("%s: not a usable CNI plugin, nothing installed: %w", src, err)
		}
		dst := filepath.Join(o.Dest, name)
		prev, _ := Version(ctx, dst, o.Timeout)
		results[i] = PluginResult{Name: name, Version: v, Previous: prev, Path: dst}
	}
	if err := os.MkdirAll(o.Dest, 0o755); err != nil {
		return nil, fmt.Errorf("%s: creating the CNI bin directory: %w", o.Dest, err)
	}
	for i := range results {
		r := &results[i]
		if r.Previous == r.Version {
			continue
		}
		if err := replace(filepath.Join(o.Source, r.Name), r.Path); err != nil {
			return results[:i], err
		}
		r.Installed = true
	}
	return results, nil
}

// sameDir reports whether a and b are the same existing directory (or
// the same path).
func sameDir(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

// replace writes src's content over dst atomically.
func replace(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	defer in.Close()
	dir := filepath.Dir(dst)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(dst)+".tmp-*")
	if err != nil {
		return fmt.Errorf("%s: creating a temporary file: %w", dir, err)
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := io.Copy(tmp, in); err != nil {
		return fmt.Errorf("%s: copying %s: %w", tmp.Name(), src, err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		return fmt.Errorf("%s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("%s: fsync: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("%s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("%s: renaming into place: %w", dst, err)
	}
	ok = true
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("%s: fsync: %w", dir, err)
	}
	return nil
}

// aboutLine is what a plugin prints on stderr when run without
// CNI_COMMAND (cni pkg/skel, plugins pkg/utils/buildversion).
var aboutLine = regexp.MustCompile(`(?m)^CNI (\S+) plugin (\S+)`)

// Version takes a plugin binary and gives its version: the one it states
// when run without CNI_COMMAND ("CNI bridge plugin v1.9.1", set at build
// time by -X …/pkg/utils/buildversion.BuildVersion), or, when it states
// "version unknown", the version of github.com/containernetworking/plugins
// recorded in the binary's Go build information. It fails for a missing
// or non-executable file, a binary that does not run or does not print
// the line, or one with no version at all.
func Version(ctx context.Context, path string, timeout time.Duration) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%s: not an executable file (mode %s)", path, fi.Mode())
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path)
	cmd.Env = []string{} // no CNI_COMMAND: the plugin prints its about line
	var stderr bytes.Buffer
	cmd.Stderr, cmd.Stdout = &stderr, io.Discard
	runErr := cmd.Run()
	var exitErr *exec.ExitError
	if runErr != nil && !errors.As(runErr, &exitErr) {
		return "", fmt.Errorf("%s: running it: %w", path, runErr)
	}
	m := aboutLine.FindStringSubmatch(stderr.String())
	if m == nil {
		how := "it exited 0"
		if runErr != nil {
			how = "it ended with " + runErr.Error()
		}
		return "", fmt.Errorf("%s: want a \"CNI <name> plugin <version>\" line on stderr without CNI_COMMAND, got %q (%s)", path, firstLine(stderr.String()), how)
	}
	if m[2] != "version" { // "version unknown"
		return m[2], nil
	}
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: states no version and has no Go build information: %w", path, err)
	}
	if bi.Main.Path == pluginsModule && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version, nil
	}
	for _, d := range bi.Deps {
		if d.Path == pluginsModule {
			if d.Replace != nil {
				d = d.Replace
			}
			return d.Version, nil
		}
	}
	return "", fmt.Errorf("%s: states no version and was not built from %s", path, pluginsModule)
}

func firstLine(s string) string {
	if i := bytes.IndexByte([]byte(s), '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

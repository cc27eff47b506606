package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/converge-dev/converge/internal/e2e/cluster"
)

// runtimePackages are the Debian packages of the container runtime the
// local cluster runs: containerd (with ctr) and runc.
var runtimePackages = []string{"containerd", "runc"}

// preflight makes sure this machine can run the demo with the binaries
// of bin: it installs containerd and runc with apt when they are missing
// and it runs as root (saying so), and otherwise fails with the one
// command to run; then cluster.Check names anything else missing (root,
// a binary of bin/, a host package).
func preflight(ctx context.Context, bin string) error {
	say("preflight: root, containerd and runc, the binaries of %s", bin)
	if missing := missingRuntime(); len(missing) > 0 {
		install := "apt-get install -y " + strings.Join(runtimePackages, " ")
		if os.Geteuid() != 0 {
			fmt.Printf("%s not found; the local cluster runs its pods with them. Run:\n\n    sudo %s && sudo make demo\n\n", strings.Join(missing, ", "), install)
			return fmt.Errorf("%s not found and not root: install %s as above", strings.Join(missing, ", "), strings.Join(runtimePackages, " and "))
		}
		note("%s not found: installing %s with apt (as root)", strings.Join(missing, ", "), strings.Join(runtimePackages, " and "))
		if err := aptInstall(ctx); err != nil {
			return err
		}
		if missing := missingRuntime(); len(missing) > 0 {
			return fmt.Errorf("%s still not in PATH after %s", strings.Join(missing, ", "), install)
		}
	}
	if err := cluster.Check(bin); err != nil {
		if os.Geteuid() != 0 {
			fmt.Printf("the local cluster needs root (an address on lo, mounts, cgroups, containerd). Run:\n\n    sudo make demo\n\n")
		}
		return fmt.Errorf("this machine cannot run the demo: %w", err)
	}
	note("ok: root; containerd, runc, git, apt and libvirt's development files; the cluster's binaries and CNI plugins in bin/")
	return nil
}

// missingRuntime names the commands of runtimePackages not in PATH.
func missingRuntime() []string {
	var missing []string
	for _, c := range []string{"containerd", "ctr", "runc"} {
		if _, err := exec.LookPath(c); err != nil {
			missing = append(missing, c)
		}
	}
	return missing
}

// aptInstall runs `apt-get update && apt-get install -y containerd runc`
// non-interactively, echoing both and their output; the error names the
// command that failed.
func aptInstall(ctx context.Context) error {
	for _, args := range [][]string{{"update"}, append([]string{"install", "-y", "--no-install-recommends"}, runtimePackages...)} {
		fmt.Printf("\n$ apt-get %s\n", strings.Join(args, " "))
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
		if err := cmd.Run(); err != nil {
			if errors.Is(err, exec.ErrNotFound) {
				return fmt.Errorf("apt-get not found: install %s with your distribution's package manager", strings.Join(runtimePackages, " and "))
			}
			return fmt.Errorf("apt-get %s: %w", strings.Join(args, " "), err)
		}
	}
	return nil
}

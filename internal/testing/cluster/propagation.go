package cluster

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// shareRootMounts makes every mount of this mount namespace shared
// (mount --make-rshared /), as systemd does on every Linux node at boot
// and as kind's node entrypoint does: a container volume with
// Bidirectional (or HostToContainer) propagation needs its host path on a
// shared mount, and the node roles use them (the VM agent's /run/netns,
// the hostpath CSI driver's kubelet and pool directories). containerd
// refuses such a container otherwise ("path … is mounted on / but it is
// not a shared mount"). It is left shared on Stop, as on a node.
func shareRootMounts() error {
	if err := unix.Mount("", "/", "", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("making / a shared mount (mount --make-rshared /): %w", err)
	}
	return nil
}

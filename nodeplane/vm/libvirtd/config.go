package libvirtd

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// header starts every file Start writes.
const header = "# Written by converge-node libvirtd at every start (package nodeplane/vm/libvirtd); edits are lost.\n"

// Config gives the configuration files Start writes into o.RunDir, by
// name: libvirtd.conf (passed with --config), virtlogd.conf (--config)
// and qemu.conf (bind-mounted over /etc/libvirt/qemu.conf, the only place
// a privileged libvirtd reads it from).
func Config(o Options) map[string]string {
	return map[string]string{
		"libvirtd.conf": header +
			// Unix sockets only: TCP and TLS are never enabled (and libvirtd
			// listens on neither without --listen, which is never passed).
			"listen_tls = 0\n" +
			"listen_tcp = 0\n" +
			"unix_sock_dir = " + strconv.Quote(o.SocketDir) + "\n" +
			"unix_sock_group = \"root\"\n" +
			"unix_sock_rw_perms = \"0700\"\n" +
			"unix_sock_ro_perms = \"0777\"\n" +
			"unix_sock_admin_perms = \"0700\"\n" +
			// The read-write socket is root's only; no polkit (no D-Bus).
			"auth_unix_rw = \"none\"\n" +
			"auth_unix_ro = \"none\"\n" +
			// Warnings and errors to stderr, which the supervisor forwards.
			"log_outputs = \"3:stderr\"\n",
		"virtlogd.conf": header +
			"log_outputs = \"3:stderr\"\n",
		"qemu.conf": header +
			// QEMU runs as root: the pod is privileged, and QEMU reads
			// kernels, disks and volumes wherever the node keeps them.
			"user = \"root\"\n" +
			"group = \"root\"\n" +
			// libvirt must not chown (and remember owners of) files it does
			// not own: volumes, kernels, serial logs.
			"dynamic_ownership = 0\n" +
			"remember_owner = 0\n" +
			// No AppArmor or SELinux profiles in the container.
			"security_driver = \"none\"\n" +
			// QEMU's stdout/stderr and serial logs go through virtlogd.
			"stdio_handler = \"logd\"\n" +
			// No cgroups of libvirt's own (machine.slice/…): QEMU stays in
			// the cgroups of the container that runs libvirtd, so the pod's
			// resources account for its VMs and the kubelet's cleanup of the
			// pod reaches them, as a virt-launcher pod holds its VM.
			"cgroup_controllers = [ ]\n",
	}
}

// writeConfig writes Config(o) into o.RunDir, replacing what a previous
// start left there.
func writeConfig(o Options) error {
	for name, content := range Config(o) {
		path := filepath.Join(o.RunDir, name)
		if err := os.WriteFile(path+".tmp", []byte(content), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return nil
}

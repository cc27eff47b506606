// Package libvirtd runs libvirt's daemons for the VM agent: virtlogd and
// the monolithic libvirtd of Debian 12 (libvirt 9.0; there is no
// virtqemud), with converge's own configuration, as the libvirtd container
// of the VM agent's DaemonSet does (`converge-node libvirtd`) and as the
// tests' real-guest setup does (internal/testing/vmtest). It is the one
// place that knows how to start them; it has no cgo.
//
// Start writes libvirtd.conf, virtlogd.conf and qemu.conf into the run
// directory (Config), then starts both daemons in a private mount
// namespace in which libvirt's compiled-in directories are converge's:
//
//	/run/libvirt      ← SocketDir (libvirt-sock, libvirt-sock-ro,
//	                     libvirt-admin-sock, virtlogd-sock, qemu/ runtime
//	                     state), when SocketDir is not /run/libvirt
//	/var/lib/libvirt  ← StateDir, when it is not /var/lib/libvirt
//	/etc/libvirt      ← StateDir/etc (persistent domain definitions; no
//	                     network, pool or filter definitions but those
//	                     created through the API, so no default network)
//	/etc/libvirt/qemu.conf ← RunDir/qemu.conf
//	/var/log/libvirt  ← LogDir, when it is not /var/log/libvirt
//
// and, with Netns set, in that network namespace with /sys remounted for
// it (as `ip netns exec` does). Nothing of this leaks to the host's mount
// table. libvirtd listens on unix sockets only (never --listen; listen_tcp
// and listen_tls are 0), unauthenticated (auth_unix_rw = "none": the
// read-write socket is root's, mode 0700), and runs QEMU as root with no
// security driver and no ownership changes (the pod is privileged; libvirt
// must not chown volumes it does not own). virtlogd is started first,
// because a privileged libvirtd does not spawn it (notes: nodeplane.md §3).
//
// Pitfalls handled here, found while running libvirtd by hand on Debian 12
// without systemd: libvirtd refuses to start when the compiled-in QEMU
// user libvirt-qemu does not exist, even with user = "root" in qemu.conf
// (Check reports it before anything starts); the daemons write pid files
// that are also locks (they go to RunDir, so two supervisors with their
// own directories do not collide); a privileged libvirtd does not start
// virtlogd; QEMU processes daemonize and are re-parented to PID 1, which
// is the supervisor in a container: with ReapOrphans it reaps them, or a
// stopped QEMU stays a zombie that libvirt still sees as alive.
package libvirtd

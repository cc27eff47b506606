package main

import (
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/converge-dev/converge/nodeplane/vm/libvirtd"
)

func init() { subcommands = append(subcommands, newLibvirtdCommand) }

// newLibvirtdCommand is `converge-node libvirtd`: virtlogd and libvirtd
// with converge's configuration (package nodeplane/vm/libvirtd), the
// libvirtd container of the VM agent's DaemonSet.
func newLibvirtdCommand() *cobra.Command {
	o := libvirtd.DefaultOptions()
	cmd := &cobra.Command{
		Use:   "libvirtd",
		Short: "run virtlogd and libvirtd with converge's configuration for the VM agent (converge-node vm)",
		Long: `libvirtd writes converge's libvirtd.conf, virtlogd.conf and qemu.conf into
--run-dir, then runs virtlogd and libvirtd (Debian 12's monolithic daemon) in
the foreground, in a private mount namespace where libvirt's directories are
converge's: /run/libvirt is --socket-dir, /var/lib/libvirt is --state-dir,
/etc/libvirt is <state-dir>/etc (persistent domains; no default network),
/var/log/libvirt is --log-dir. libvirtd listens on unix sockets only, in
--socket-dir (share it with the converge-node vm container, which connects to
<socket-dir>/libvirt-sock); QEMU runs as root with no security driver.

It forwards both daemons' output, prefixed, to stderr; prints "ready" with
the libvirt URI once libvirtd accepts connections; stops both on SIGTERM or
SIGINT (libvirtd first); and exits non-zero as soon as either daemon dies,
after stopping the other, so that the kubelet restarts the container. It
reaps the QEMU processes re-parented to it (it is the container's PID 1, or
makes itself a child subreaper).

Needs root, the libvirtd and virtlogd binaries (Debian libvirt-daemon,
libvirt-daemon-driver-qemu) and the user libvirt-qemu in /etc/passwd.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Output = cmd.ErrOrStderr()
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)).With("component", "converge-node libvirtd")
			// QEMU daemonizes: its orphans come to this process, which
			// reaps them, rather than to an init that may not exist.
			if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
				return fmt.Errorf("libvirtd: becoming a child subreaper: %w", err)
			}
			o.ReapOrphans = true
			err := libvirtd.Run(cmd.Context(), o, func(d *libvirtd.Daemons) {
				vl, lv := d.Pids()
				log.Info("ready", "uri", d.URI(), "virtlogd", vl, "libvirtd", lv, "socketDir", o.SocketDir, "stateDir", o.StateDir, "logDir", o.LogDir)
			})
			if err != nil {
				return fmt.Errorf("libvirtd: %w", err)
			}
			log.Info("stopped")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.RunDir, "run-dir", o.RunDir, "directory the configuration files and pid files are written to at start")
	f.StringVar(&o.SocketDir, "socket-dir", o.SocketDir, "directory of libvirtd's and virtlogd's unix sockets, shared with converge-node vm")
	f.StringVar(&o.StateDir, "state-dir", o.StateDir, "libvirt's /var/lib/libvirt; <state-dir>/etc is its /etc/libvirt (persistent domain definitions)")
	f.StringVar(&o.LogDir, "log-dir", o.LogDir, "libvirt's /var/log/libvirt (QEMU's logs, qemu/<domain>.log)")
	f.StringVar(&o.Libvirtd, "libvirtd", o.Libvirtd, "libvirtd binary")
	f.StringVar(&o.Virtlogd, "virtlogd", o.Virtlogd, "virtlogd binary")
	f.DurationVar(&o.StartTimeout, "start-timeout", o.StartTimeout, "longest wait for each daemon's socket at start")
	f.DurationVar(&o.StopTimeout, "stop-timeout", o.StopTimeout, "time each daemon gets after SIGTERM before SIGKILL")
	return cmd
}

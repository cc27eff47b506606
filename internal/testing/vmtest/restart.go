package vmtest

import (
	"testing"
	"time"
)

// RestartLibvirtd stops the daemons StartLibvirt started (libvirtd, then
// virtlogd: SIGTERM, as the kubelet stops the libvirtd container) and
// starts new ones with the same directories and network namespace,
// stopped in t.Cleanup like the first, and waits until URI answers again.
// Running domains survive: QEMU outlives libvirtd, which re-attaches to
// it on start (its state is in the socket directory, libvirt's
// /run/libvirt). It gives how long the daemon was away.
func (l *Libvirt) RestartLibvirtd(t *testing.T) time.Duration {
	t.Helper()
	start := time.Now()
	if err := l.daemons.Stop(); err != nil {
		t.Fatalf("stopping libvirtd: %v", err)
	}
	l.start(t)
	return time.Since(start)
}

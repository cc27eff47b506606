package controlplane

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ControllerManagerBinary is the file name of kube-controller-manager in
// BinDir, built by hack/controlplane/build.sh.
const ControllerManagerBinary = "kube-controller-manager"

// PersistentVolumeControllers are the kube-controller-manager controllers
// that bind PVCs to PVs, hand provisioning and deletion to external
// provisioners, and keep in-use PVs and PVCs from being deleted: what a
// test of a CSI provisioner needs.
var PersistentVolumeControllers = []string{
	"persistentvolume-binder-controller",
	"persistentvolume-protection-controller",
	"persistentvolumeclaim-protection-controller",
}

// ControllerManager is a running kube-controller-manager started by
// StartControllerManager.
type ControllerManager struct {
	cmd     *exec.Cmd
	dir     string
	logPath string
	done    chan struct{}
	waitErr error
	stop    sync.Once
}

// ControllerManagerAvailable reports whether bin holds kube-controller-manager.
func ControllerManagerAvailable(bin string) bool {
	_, err := os.Stat(filepath.Join(bin, ControllerManagerBinary))
	return err == nil
}

// StartControllerManager starts kube-controller-manager from BinDir
// against env with only the named controllers (e.g.
// PersistentVolumeControllers; at least one), as the cluster admin, with
// leader election off, no service-account credentials, and its secure
// port on a free loopback port. It returns once /healthz answers 200
// (within 60 s) and fails with the tail of its log when it exits or does
// not answer. Stop it with ControllerManager.Stop before env.Stop.
func StartControllerManager(env *Env, controllers ...string) (*ControllerManager, error) {
	if len(controllers) == 0 {
		return nil, errors.New("kube-controller-manager: at least one controller required")
	}
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	if !ControllerManagerAvailable(bin) {
		return nil, fmt.Errorf("kube-controller-manager: not found in %s: run hack/controlplane/build.sh", bin)
	}
	dir, err := os.MkdirTemp("", "converge-kcm-")
	if err != nil {
		return nil, fmt.Errorf("kube-controller-manager: %w", err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := env.Kubeconfig(kubeconfig); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("kube-controller-manager: writing kubeconfig: %w", err)
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("kube-controller-manager: %w", err)
	}
	logPath := filepath.Join(dir, "kube-controller-manager.log")
	logf, err := os.Create(logPath)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("kube-controller-manager: %w", err)
	}
	cmd := exec.Command(filepath.Join(bin, ControllerManagerBinary),
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig,
		"--authorization-kubeconfig="+kubeconfig,
		"--controllers="+strings.Join(controllers, ","),
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
		"--cert-dir="+filepath.Join(dir, "certs"),
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("kube-controller-manager: %w", err)
	}
	m := &ControllerManager{cmd: cmd, dir: dir, logPath: logPath, done: make(chan struct{})}
	go func() { m.waitErr = cmd.Wait(); logf.Close(); close(m.done) }()
	if err := m.waitHealthy(port, 60*time.Second); err != nil {
		log := m.LogTail(2000)
		m.Stop()
		return nil, fmt.Errorf("kube-controller-manager: %w; log tail:\n%s", err, log)
	}
	return m, nil
}

// waitHealthy polls https://127.0.0.1:port/healthz (kube-controller-manager
// allows it without credentials) until it answers 200.
func (m *ControllerManager) waitHealthy(port int, timeout time.Duration) error {
	err := pollOK("https://127.0.0.1:"+strconv.Itoa(port)+"/healthz", timeout, 200*time.Millisecond, m.done)
	if errors.Is(err, errExited) {
		return fmt.Errorf("%w: %v", err, m.waitErr)
	}
	return err
}

// LogTail returns the last n bytes of the controller manager's output.
func (m *ControllerManager) LogTail(n int) string {
	b, err := os.ReadFile(m.logPath)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

// Stop terminates the process (SIGTERM, SIGKILL after 10 s), waits for it
// and removes its kubeconfig, certificates and log. Safe to call twice.
func (m *ControllerManager) Stop() {
	m.stop.Do(func() {
		_ = m.cmd.Process.Signal(os.Interrupt)
		select {
		case <-m.done:
		case <-time.After(10 * time.Second):
			_ = m.cmd.Process.Kill()
			<-m.done
		}
		os.RemoveAll(m.dir)
	})
}

// freePort gives a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

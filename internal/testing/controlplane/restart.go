package controlplane

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Process names one process of a control plane, for Kill and Restart.
type Process string

const (
	APIServer Process = "kube-apiserver"
	Etcd      Process = "etcd"
)

// Restartable is a control plane whose processes can be killed and
// restarted on the same data, for fault-injection tests.
type Restartable struct {
	*Env
	// dir holds etcd's data and kube-apiserver's certificates.
	dir string
}

// StartRestartable is Start for fault-injection tests: etcd's data
// directory and kube-apiserver's certificate directory are directories of
// the control plane's own (envtest would make throwaway ones, removed when
// a process stops), so Kill can end either process abruptly and Restart
// start it again on the same data, ports and certificates: clients of
// Config keep working. Stop removes the directories.
func StartRestartable() (*Restartable, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	if !Available(bin) {
		return nil, fmt.Errorf("controlplane: kube-apiserver and etcd not found in %s: run `make bin/kube-apiserver`", bin)
	}
	dir, err := os.MkdirTemp("", "converge-controlplane-")
	if err != nil {
		return nil, err
	}
	certDir := filepath.Join(dir, "apiserver")
	if err := os.Mkdir(certDir, 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	env := &envtest.Environment{BinaryAssetsDirectory: bin}
	env.ControlPlane.Etcd = &envtest.Etcd{DataDir: filepath.Join(dir, "etcd")}
	env.ControlPlane.APIServer = &envtest.APIServer{CertDir: certDir}
	cfg, err := env.Start()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("controlplane: starting kube-apiserver and etcd: %w", err)
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	return &Restartable{Env: &Env{Environment: env, Config: cfg}, dir: dir}, nil
}

// Stop stops kube-apiserver and etcd (envtest's Stop) and removes their
// directories.
func (e *Restartable) Stop() error {
	err := e.Environment.Stop()
	if rerr := os.RemoveAll(e.dir); err == nil {
		err = rerr
	}
	return err
}

// Kill sends SIGKILL to p, as a crash or the OOM killer would, and waits
// until it is gone; its data stays for Restart.
func (e *Restartable) Kill(p Process) error {
	pid, err := e.pid(p)
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("controlplane: killing %s (pid %d): %w", p, pid, err)
	}
	// envtest's own goroutine waits for (reaps) the process.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("controlplane: %s (pid %d) still there 30 s after SIGKILL", p, pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Restart starts p again after Kill, on the same data directory, ports
// and certificates, and waits until kube-apiserver answers /readyz (also
// for etcd: the API server is usable once it has reconnected), within
// timeout.
func (e *Restartable) Restart(p Process, timeout time.Duration) error {
	cp := &e.ControlPlane
	var stop, start func() error
	switch p {
	case Etcd:
		stop, start = cp.Etcd.Stop, cp.Etcd.Start
	case APIServer:
		stop, start = cp.APIServer.Stop, cp.APIServer.Start
	default:
		return fmt.Errorf("controlplane: unknown process %q", p)
	}
	// Stop only resets envtest's record of the dead process; it fails
	// (signalling it) until envtest's goroutine has seen it exit.
	deadline := time.Now().Add(10 * time.Second)
	err := stop()
	for err != nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		err = stop()
	}
	if err == nil {
		err = start()
	}
	if err != nil {
		return fmt.Errorf("controlplane: restarting %s: %w", p, err)
	}
	return e.waitReady(timeout)
}

// waitReady polls kube-apiserver's /readyz (anonymous access, allowed
// by the default RBAC) until it answers 200.
func (e *Restartable) waitReady(timeout time.Duration) error {
	if err := pollOK(strings.TrimSuffix(e.Config.Host, "/")+"/readyz", timeout, 50*time.Millisecond, nil); err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	return nil
}

// pid finds p among this process's children by the directory envtest
// passed it (etcd's --data-dir, kube-apiserver's --cert-dir): envtest
// does not expose its processes.
func (e *Restartable) pid(p Process) (int, error) {
	var flag string
	switch p {
	case Etcd:
		flag = "--data-dir=" + e.ControlPlane.Etcd.DataDir
	case APIServer:
		flag = "--cert-dir=" + e.ControlPlane.APIServer.CertDir
	default:
		return 0, fmt.Errorf("controlplane: unknown process %q", p)
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	self := os.Getpid()
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		if parent(pid) != self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, arg := range bytes.Split(cmdline, []byte{0}) {
			if string(arg) == flag {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("controlplane: no running %s with %s among this process's children", p, flag)
}

// parent gives the parent process ID of pid from /proc/<pid>/stat, or -1.
func parent(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	// pid (comm) state ppid ...; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return -1
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return -1
	}
	return ppid
}

package cluster

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc identifies a process across PID reuse: its PID and its start time
// in clock ticks since boot (field 22 of /proc/<pid>/stat).
type proc struct {
	Name  string `json:"name"`
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// startTime reads the start time of pid from /proc; ok is false when the
// process does not exist.
func startTime(pid int) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); the start time is field 22.
	if len(f) < 20 {
		return 0, false
	}
	st, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, false
	}
	if f[0] == "Z" { // a zombie has exited; only its parent's wait is missing
		return st, false
	}
	return st, true
}

// alive reports whether p still runs (same PID, same start time).
func (p proc) alive() bool {
	st, ok := startTime(p.PID)
	return ok && st == p.Start
}

// running is a process Start launched, with a channel closed at its exit.
type running struct {
	proc
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// launch starts argv with stdout and stderr appended to logPath, in a
// session of its own (so a terminal's signals do not reach it). Unless
// detach is set, the kernel kills it when the calling thread's process
// dies (Pdeathsig), so a crashed test leaves no control plane running.
func launch(name string, argv []string, env []string, logPath string, detach bool) (*running, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if !detach {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("%s: starting %s: %w", name, argv[0], err)
	}
	st, _ := startTime(cmd.Process.Pid)
	r := &running{proc: proc{Name: name, PID: cmd.Process.Pid, Start: st}, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		r.err = cmd.Wait()
		logf.Close()
		close(r.done)
	}()
	return r, nil
}

// exited reports whether the process has ended, with its wait error.
func (r *running) exited() (bool, error) {
	select {
	case <-r.done:
		return true, r.err
	default:
		return false, nil
	}
}

// killProcs sends SIGKILL to every process of ps that is still the same
// process, and waits up to timeout for all of them to be gone.
func killProcs(ps []proc, timeout time.Duration) error {
	for _, p := range ps {
		if p.alive() {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		var left []string
		for _, p := range ps {
			if p.alive() {
				left = append(left, fmt.Sprintf("%s (pid %d)", p.Name, p.PID))
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still running after SIGKILL and %s: %s", timeout, strings.Join(left, ", "))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// clusterPrograms are the programs a cluster runs outside its pods.
var clusterPrograms = map[string]bool{
	"etcd": true, "kube-apiserver": true, "kube-controller-manager": true, "kube-scheduler": true, "kube-proxy": true,
	"kubelet": true, "containerd": true, "containerd-shim-runc-v2": true, "runc": true, "ctr": true,
}

// procsMentioning lists the processes of clusterPrograms (other than this
// one) whose command line contains one of the given paths: the cluster's
// daemons name their work directory or LockDir in their flags, and
// containerd's shims name its socket, so this finds what a run left
// behind even without its PIDs.
func procsMentioning(paths ...string) []proc {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		cmdline := string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		if !clusterPrograms[filepath.Base(string(bytes.SplitN(b, []byte{0}, 2)[0]))] {
			continue
		}
		for _, p := range paths {
			if len(p) > 1 && strings.Contains(cmdline, p) {
				st, ok := startTime(pid)
				if ok {
					name := strings.Fields(cmdline)[0]
					out = append(out, proc{Name: filepath.Base(name), PID: pid, Start: st})
				}
				break
			}
		}
	}
	return out
}

// cmdlineOf gives pid's command line with spaces between arguments, or "".
func cmdlineOf(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
}

// tail gives the last n bytes of the file at path, from a line start.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
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

package libvirtd

import (
	"bytes"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// reaper waits for the zombies re-parented to this process (QEMU
// daemonizes, so its parent becomes PID 1, the supervisor in a container,
// or the nearest child subreaper), except the daemons, whose exit status
// exec.Cmd.Wait collects. Without it a stopped QEMU stays a zombie, which
// libvirt's kill(pid, 0) still finds alive.
type reaper struct {
	mu   sync.Mutex
	kept map[int]bool
	sigs chan os.Signal
	done chan struct{}
	wg   sync.WaitGroup
}

// startReaper reaps on every SIGCHLD and every 10 s until stop.
func startReaper() *reaper {
	r := &reaper{kept: map[int]bool{}, sigs: make(chan os.Signal, 1), done: make(chan struct{})}
	signal.Notify(r.sigs, syscall.SIGCHLD)
	r.wg.Go(func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-r.done:
				return
			case <-r.sigs:
			case <-t.C:
			}
			r.reap()
		}
	})
	return r
}

// startKept runs start (which starts a daemon and gives its PID) with
// reaping held off, and excludes that PID from reaping, so a daemon that
// exits at once is still left to exec.Cmd.Wait.
func (r *reaper) startKept(start func() (int, error)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := start()
	if err == nil {
		r.kept[pid] = true
	}
	return err
}

func (r *reaper) stop() {
	signal.Stop(r.sigs)
	close(r.done)
	r.wg.Wait()
}

// reap waits for every zombie child of this process that is not kept.
func (r *reaper) reap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, pid := range zombieChildren("/proc", os.Getpid()) {
		if r.kept[pid] {
			continue
		}
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
	}
}

// zombieChildren gives the PIDs under procDir whose state is Z (zombie)
// and whose parent is ppid.
func zombieChildren(procDir string, ppid int) []int {
	entries, err := os.ReadDir(procDir)
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(procDir, e.Name(), "stat"))
		if err != nil {
			continue
		}
		state, parent, ok := parseStat(b)
		if ok && state == 'Z' && parent == ppid {
			out = append(out, pid)
		}
	}
	return out
}

// parseStat reads the state and parent PID of a /proc/<pid>/stat line,
// "pid (comm) S ppid …"; comm may hold spaces and parentheses, so the
// fields start after the last ')'.
func parseStat(b []byte) (state byte, ppid int, ok bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 || len(f[0]) != 1 {
		return 0, 0, false
	}
	ppid, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return 0, 0, false
	}
	return f[0][0], ppid, true
}

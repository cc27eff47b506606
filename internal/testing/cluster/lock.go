package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Owner is the record of the process that started the machine's cluster,
// kept in LockDir/owner.json while the cluster exists.
type Owner struct {
	// PID and Start identify the starting process; Cmdline is its
	// command line.
	PID     int    `json:"pid"`
	Start   uint64 `json:"start"`
	Cmdline string `json:"cmdline"`
	// Dir is the cluster's work directory (its state.json tells what to
	// stop and clean).
	Dir string `json:"dir"`
	// Since is when Start began.
	Since time.Time `json:"since"`
	// Detached is set once the cluster outlives its starter (`make
	// cluster`).
	Detached bool `json:"detached"`
}

// String names the holder for error messages.
func (o Owner) String() string {
	how := fmt.Sprintf("process %d (%s)", o.PID, o.Cmdline)
	if o.Detached {
		how = fmt.Sprintf("%s, left running", how)
	}
	return fmt.Sprintf("%s since %s, work directory %s", how, o.Since.Format(time.RFC3339), o.Dir)
}

var (
	lockPath  = filepath.Join(LockDir, "lock")
	ownerPath = filepath.Join(LockDir, "owner.json")
)

// ErrRunning is wrapped by Start's error when another cluster holds the
// machine.
var ErrRunning = errors.New("a cluster is already running on this machine")

// hostLock is the flock on lockPath, held by the process that owns the
// cluster (released when it dies) and, briefly, by StopRunning.
type hostLock struct{ f *os.File }

// acquireLock takes the flock on lockPath, waiting up to wait while a
// live process holds it. It fails with ErrRunning, naming the holder from
// owner.json, when the lock stays held.
func acquireLock(wait time.Duration) (*hostLock, error) {
	if err := os.MkdirAll(LockDir, 0o755); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	deadline := time.Now().Add(wait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return &hostLock{f: f}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("cluster: flock %s: %w", lockPath, err)
		}
		if o, _ := readOwner(); o != nil && o.PID == os.Getpid() && !o.Detached {
			f.Close()
			return nil, fmt.Errorf("cluster: %w: this process started it (work directory %s); stop it before starting another", ErrRunning, o.Dir)
		}
		if time.Now().After(deadline) {
			f.Close()
			holder := "another process"
			if o, err := readOwner(); err == nil && o != nil {
				holder = o.String()
			}
			return nil, fmt.Errorf("cluster: %w: held by %s (lock %s)", ErrRunning, holder, lockPath)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// release gives the flock up.
func (l *hostLock) release() {
	if l != nil && l.f != nil {
		l.f.Close()
		l.f = nil
	}
}

// readOwner reads owner.json; it gives nil, nil when there is none.
func readOwner() (*Owner, error) {
	b, err := os.ReadFile(ownerPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var o Owner
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, fmt.Errorf("cluster: %s: %w", ownerPath, err)
	}
	return &o, nil
}

// writeOwner replaces owner.json.
func writeOwner(o Owner) error {
	return writeJSON(ownerPath, o)
}

// writeJSON writes v to path through a temporary file and a rename.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// selfOwner describes the calling process as an owner of a cluster in dir.
func selfOwner(dir string) Owner {
	pid := os.Getpid()
	st, _ := startTime(pid)
	return Owner{PID: pid, Start: st, Cmdline: cmdlineOf(pid), Dir: dir, Since: time.Now()}
}

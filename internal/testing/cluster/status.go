package cluster

import (
	"path/filepath"
)

// Status describes the machine's cluster as the lock's owner record and
// the cluster's state record tell it.
type Status struct {
	// Owner is the record of the process that started the cluster; nil
	// when no cluster is recorded.
	Owner *Owner
	// Kubeconfig is the admin kubeconfig of the recorded cluster.
	Kubeconfig string
	// Procs are the cluster's processes and whether each still runs.
	Procs []ProcStatus
}

// ProcStatus is one process of a cluster.
type ProcStatus struct {
	Name    string
	PID     int
	Running bool
}

// Running reports whether every recorded process runs.
func (s Status) Running() bool {
	if s.Owner == nil || len(s.Procs) == 0 {
		return false
	}
	for _, p := range s.Procs {
		if !p.Running {
			return false
		}
	}
	return true
}

// CurrentStatus reads the machine's cluster records (without taking the
// lock): the owner, the kubeconfig and whether each process runs.
func CurrentStatus() (Status, error) {
	o, err := readOwner()
	if err != nil || o == nil {
		return Status{}, err
	}
	s := Status{Owner: o, Kubeconfig: filepath.Join(o.Dir, "kubeconfig")}
	st, err := loadState(o.Dir)
	if err != nil || st == nil {
		return s, err
	}
	for _, p := range st.Procs {
		s.Procs = append(s.Procs, ProcStatus{Name: p.Name, PID: p.PID, Running: p.alive()})
	}
	return s, nil
}

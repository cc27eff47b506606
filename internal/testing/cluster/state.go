package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// state is what Stop needs to undo a Start, kept in Dir/state.json and
// rewritten after every step that changes the host, so that a later
// process can clean up after a Start whose process died.
type state struct {
	Dir            string `json:"dir"`
	BinDir         string `json:"binDir"`
	NodeName       string `json:"nodeName"`
	KubeletRootDir string `json:"kubeletRootDir"`
	// TempDir: Dir was made by Start and is removed whole by Stop.
	TempDir  bool `json:"tempDir"`
	KeepLogs bool `json:"keepLogs"`
	// Created lists the host directories outside Dir that Start created
	// (removed by Stop when empty of anything not ours).
	Created []string `json:"created,omitempty"`
	// Sysctls holds the values of the sysctls (paths under
	// /proc/sys) found before Start changed them.
	Sysctls map[string]string `json:"sysctls,omitempty"`
	// Procs are the processes started, in start order.
	Procs []proc `json:"procs,omitempty"`
}

func statePath(dir string) string { return filepath.Join(dir, "state.json") }

// save writes the state to Dir/state.json.
func (s *state) save() error {
	if err := writeJSON(statePath(s.Dir), s); err != nil {
		return fmt.Errorf("cluster: saving state: %w", err)
	}
	return nil
}

// loadState reads Dir/state.json; it gives nil, nil when there is none.
func loadState(dir string) (*state, error) {
	b, err := os.ReadFile(statePath(dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("cluster: %s: %w", statePath(dir), err)
	}
	return &s, nil
}

// created records that Start made the host directory path.
func (s *state) created(path string) {
	s.Created = append(s.Created, path)
}

// wasCreated reports whether Start made path.
func (s *state) wasCreated(path string) bool {
	for _, c := range s.Created {
		if c == path {
			return true
		}
	}
	return false
}

// claim records the topmost missing directory on the way to path as
// created by this cluster (a daemon will create it), so that Stop removes
// it; nothing is recorded when path exists.
func (s *state) claim(path string) error {
	top := ""
	for p := filepath.Clean(path); ; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err == nil {
			break
		}
		top = p
		if p == filepath.Dir(p) {
			break
		}
	}
	if top == "" || s.wasCreated(top) {
		return nil
	}
	s.created(top)
	return s.save()
}

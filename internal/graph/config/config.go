// Package config loads a HyperConverged config — the manifests a config
// repository holds — into CUE values that keep their file positions, so
// that validation errors can name file, line and column.
package config

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/encoding/yaml"
)

// Kinds the config may hold, by "apiVersion/kind".
const (
	KindHyperConverged      = "hco.kubevirt.io/v1beta1/HyperConverged"
	KindHyperConvergedV1    = "hco.kubevirt.io/v1/HyperConverged"
	KindHostPathProvisioner = "hostpathprovisioner.kubevirt.io/v1beta1/HostPathProvisioner"
)

// Config is a loaded config: the HyperConverged and, when the repository
// holds one, the HostPathProvisioner. Values are unvalidated user input;
// validation happens against the schema (package graph).
type Config struct {
	// Dir is the directory the config was loaded from.
	Dir string
	// HyperConverged is the HC document.
	HyperConverged cue.Value
	// HostPathProvisioner is the HPP document; it does not exist
	// (Exists() is false) when the config has none.
	HostPathProvisioner cue.Value
	// Files lists the files read, relative to Dir, sorted.
	Files []string
}

// Load reads every *.yaml, *.yml and *.json file directly in dir (or the
// single file dir names), each possibly holding several YAML documents,
// and picks the HyperConverged and HostPathProvisioner documents by
// apiVersion and kind. It fails, naming file and line, on a syntax error,
// a document of another kind, a second HC or HPP, or when no HC is found.
func Load(ctx *cue.Context, dir string) (*Config, error) {
	files, err := listFiles(dir)
	if err != nil {
		return nil, err
	}
	cfg := &Config{Dir: dir}
	for _, path := range files {
		if err := cfg.addFile(ctx, path); err != nil {
			return nil, err
		}
		cfg.Files = append(cfg.Files, path)
	}
	if !cfg.HyperConverged.Exists() {
		return nil, fmt.Errorf("%s: no HyperConverged (apiVersion hco.kubevirt.io/v1beta1 or hco.kubevirt.io/v1, kind HyperConverged) found in %s",
			dir, strings.Join(cfg.Files, ", "))
	}
	return cfg, nil
}

func listFiles(dir string) ([]string, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if !st.IsDir() {
		return []string{dir}, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var files []string
	for _, e := range entries {
		switch strings.ToLower(filepath.Ext(e.Name())) {
		case ".yaml", ".yml", ".json":
			if !e.IsDir() {
				files = append(files, filepath.Join(dir, e.Name()))
			}
		}
	}
	sort.Strings(files)
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no *.yaml, *.yml or *.json files", dir)
	}
	return files, nil
}

func (c *Config) addFile(ctx *cue.Context, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	f, err := yaml.Extract(path, data)
	if err != nil {
		return fmt.Errorf("%w", err)
	}
	v := ctx.BuildFile(f)
	if err := v.Err(); err != nil {
		return err
	}
	docs := []cue.Value{v}
	if v.Kind() == cue.ListKind {
		docs = docs[:0]
		it, _ := v.List()
		for it.Next() {
			docs = append(docs, it.Value())
		}
	}
	for _, d := range docs {
		if d.Kind() == cue.NullKind {
			continue // an empty YAML document
		}
		if err := c.addDoc(path, d); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) addDoc(path string, d cue.Value) error {
	av, _ := d.LookupPath(cue.ParsePath("apiVersion")).String()
	k, _ := d.LookupPath(cue.ParsePath("kind")).String()
	pos := d.Pos()
	switch av + "/" + k {
	case KindHyperConverged, KindHyperConvergedV1:
		if c.HyperConverged.Exists() {
			return fmt.Errorf("%s: a second HyperConverged (the first is at %s); a config holds one", pos, c.HyperConverged.Pos())
		}
		c.HyperConverged = d
	case KindHostPathProvisioner:
		if c.HostPathProvisioner.Exists() {
			return fmt.Errorf("%s: a second HostPathProvisioner (the first is at %s); a config holds one", pos, c.HostPathProvisioner.Pos())
		}
		c.HostPathProvisioner = d
	default:
		return fmt.Errorf("%s: unsupported document apiVersion %q kind %q: a config holds a HyperConverged (%s) and optionally a HostPathProvisioner (%s)",
			pos, av, k, "hco.kubevirt.io/v1beta1 or v1", "hostpathprovisioner.kubevirt.io/v1beta1")
	}
	return nil
}

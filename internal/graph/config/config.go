// Package config loads a HyperConverged config — the manifests a config
// repository holds — into CUE values that keep their file positions, so
// that validation errors can name file, line and column: the
// HyperConverged, optionally a HostPathProvisioner, and the workloads
// (WorkloadKinds: VirtualMachines, DataVolumes, networks, instancetypes and
// the plain objects they need), which the graph applies as its workloads
// component once the stack is healthy.
package config

import (
	"fmt"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/token"
)

// Kinds the config may hold, by "apiVersion/kind".
const (
	KindHyperConverged      = "hco.kubevirt.io/v1beta1/HyperConverged"
	KindHyperConvergedV1    = "hco.kubevirt.io/v1/HyperConverged"
	KindHostPathProvisioner = "hostpathprovisioner.kubevirt.io/v1beta1/HostPathProvisioner"
)

// Config is a loaded config: the HyperConverged, the HostPathProvisioner
// when the repository holds one, and the workloads. Values are unvalidated
// user input; validation happens against the schema and the workload
// checks (package graph).
type Config struct {
	// Dir is the directory the config was loaded from.
	Dir string
	// HyperConverged is the HC document.
	HyperConverged cue.Value
	// HostPathProvisioner is the HPP document; it does not exist
	// (Exists() is false) when the config has none.
	HostPathProvisioner cue.Value
	// Workloads are the workload documents (WorkloadKinds), in file order
	// and, within a file, in document order.
	Workloads []Document
	// Files lists the files read (Dir joined with each name, or Dir when
	// it names a file), sorted.
	Files []string
}

// Document is one workload document of a config.
type Document struct {
	// Kind is its type.
	Kind Kind
	// Value is the document as written, with its positions.
	Value cue.Value
	// Pos is where the document starts.
	Pos token.Pos
}

// Error is a config Load refused: one line per problem, each naming the
// file and, where the problem has one, line, column and field path.
type Error struct{ Lines []string }

func (e *Error) Error() string { return strings.Join(e.Lines, "\n") }

// Load reads every *.yaml, *.yml and *.json file directly in dir (or the
// single file dir names), each holding one or more YAML documents, and
// sorts the documents by apiVersion and kind into the HyperConverged, the
// HostPathProvisioner and the workloads (WorkloadKinds).
//
// Load never leaves dir (for a single file, its directory): it reads
// through an os.Root, so a symbolic link is followed only while it stays
// inside, and it reads regular files only, each of at most MaxFileBytes
// and all together of at most MaxConfigBytes.
//
// It fails on a file it refuses (a link leading out of dir, a device, a
// named pipe, a socket, a file above the bounds, text that is not UTF-8),
// a file that holds no document (empty or comments only), a syntax
// error, a key given twice in one mapping, an integer outside int64,
// .inf or .nan, a mapping, list or file of more than MaxCollectionItems
// keys, items or documents, more than MaxNodes YAML nodes, a document of any other kind (naming the
// accepted ones), a document without apiVersion or kind, a second HC or
// HPP, or when no HC is found. The error (*Error) has one line per problem, each naming
// the file and, where the problem has one, line, column and field path.
// Other errors say that dir cannot be read, holds no *.yaml, *.yml or
// *.json file, or holds no HC.
func Load(ctx *cue.Context, dir string) (*Config, error) {
	cfg, err := LoadDocuments(ctx, dir)
	if err != nil {
		return nil, err
	}
	if !cfg.HyperConverged.Exists() {
		return nil, fmt.Errorf("%s: no HyperConverged (apiVersion hco.kubevirt.io/v1beta1 or hco.kubevirt.io/v1, kind HyperConverged) found in %s",
			dir, strings.Join(cfg.Files, ", "))
	}
	return cfg, nil
}

// LoadDocuments is Load without requiring a HyperConverged: `converge
// vet` checks a file or directory holding workloads only (a VirtualMachine
// manifest) with it.
func LoadDocuments(ctx *cue.Context, dir string) (*Config, error) {
	files, lines, err := readFiles(dir)
	if err != nil {
		return nil, err
	}
	cfg := &Config{Dir: dir}
	nodes := 0
	for _, f := range files {
		docs, refused, n := decodeFile(ctx, f, MaxNodes-nodes)
		nodes += n
		lines = append(lines, refused...)
		for _, d := range docs {
			if err := cfg.addDoc(d); err != nil {
				lines = append(lines, err.Error())
			}
		}
		cfg.Files = append(cfg.Files, f.path)
	}
	if len(lines) > 0 {
		return nil, &Error{Lines: lines}
	}
	return cfg, nil
}

func (c *Config) addDoc(d cue.Value) error {
	pos := d.Pos()
	if d.Kind() != cue.StructKind {
		return fmt.Errorf("%s: a document is a %s; expected an object with apiVersion and kind", pos, d.IncompleteKind())
	}
	av, _ := d.LookupPath(cue.ParsePath("apiVersion")).String()
	k, _ := d.LookupPath(cue.ParsePath("kind")).String()
	if av == "" || k == "" {
		return fmt.Errorf("%s: a document without apiVersion or kind; a config holds %s", pos, acceptedKinds())
	}
	if wk, ok := WorkloadKind(av, k); ok {
		c.Workloads = append(c.Workloads, Document{Kind: wk, Value: d, Pos: pos})
		return nil
	}
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
		return fmt.Errorf("%s: unsupported document apiVersion %q kind %q: a config holds %s",
			pos, av, k, acceptedKinds())
	}
	return nil
}

package images

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// CLIPath is where the controller image carries the converge CLI binaries
// (<arch>/<os>/converge[.exe] below it), the directory converge-controller
// --cli-download-dir serves.
const CLIPath = "usr/share/converge/cli"

// CLIBinaries lists the CLI binaries of dir, laid out <arch>/<os>/
// converge[.exe]: their path relative to dir (with /) → their path on
// disk. It fails when dir cannot be read or holds none, naming dir.
func CLIBinaries(dir string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if strings.Count(rel, "/") == 2 && d.Type().IsRegular() && (d.Name() == "converge" || d.Name() == "converge.exe") {
			out[rel] = p
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("images: CLI binaries: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("images: %s holds no <arch>/<os>/converge: build the CLI there (hack/images does; make cli-binaries adds the other platforms)", dir)
	}
	return out, nil
}

// sortedKeys gives m's keys in order.
func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

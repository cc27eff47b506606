package importer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// RemoveStale removes what an import into path (Import, ImportRegistry,
// ImportReader, Clone) leaves next to it when its process dies before its
// deferred cleanup runs (SIGKILL, OOM kill, a node crash): the temporary
// files ".<base>.download-*", ".<base>.raw-*" and ".<base>.clone-*" and
// the unpacked archive directories ".oci-archive-*" in path's directory.
// It gives the names removed. Call it only while no import into path
// runs, as the cdi-importer agent does before each run of a DataVolume's
// import; path itself is left alone.
func RemoveStale(path string) ([]string, error) {
	dir, base := filepath.Dir(path), filepath.Base(path)
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("temporaries of %s: %w", path, err)
	}
	var removed []string
	for _, e := range ents {
		n := e.Name()
		stale := strings.HasPrefix(n, ".oci-archive-") && e.IsDir()
		for _, kind := range []string{"download", "raw", "clone"} {
			stale = stale || (strings.HasPrefix(n, "."+base+"."+kind+"-") && e.Type().IsRegular())
		}
		if !stale {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, n)); err != nil {
			return removed, fmt.Errorf("temporaries of %s: %w", path, err)
		}
		removed = append(removed, n)
	}
	return removed, nil
}

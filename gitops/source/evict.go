package source

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// evictPrefix names per-URL directories being deleted by evict; they are
// renamed first so that a crash mid-delete leaves nothing that looks like a
// usable clone.
const evictPrefix = ".evict-"

// evict deletes whole per-URL directories of cacheDir, least recently used
// first (by the modification time of the directory, which Fetch sets on
// every use), until the cache holds at most maxBytes. It never deletes
// current, nor a directory whose lock another Fetch holds; it gives up
// (leaving the cache above the bound) when nothing else can go. Only one
// eviction per cacheDir runs at a time in a process; a second one is
// skipped. Errors are ignored: eviction is best effort.
func evict(cacheDir, current string, maxBytes int64) {
	unlockDir, ok := tryLock(cacheDir + "\x00evict")
	if !ok {
		return
	}
	defer unlockDir()

	entries, err := os.ReadDir(cacheDir)
	if err != nil {
		return
	}
	type urlDir struct {
		path string
		used time.Time
		size int64
	}
	var total int64
	var dirs []urlDir
	for _, e := range entries {
		p := filepath.Join(cacheDir, e.Name())
		if strings.HasPrefix(e.Name(), evictPrefix) {
			_ = os.RemoveAll(p) // left over from an interrupted eviction
			continue
		}
		info, err := e.Info()
		if err != nil || !e.IsDir() {
			continue
		}
		size := dirSize(p)
		total += size
		dirs = append(dirs, urlDir{p, info.ModTime(), size})
	}
	slices.SortFunc(dirs, func(a, b urlDir) int { return a.used.Compare(b.used) })
	for _, d := range dirs {
		if total <= maxBytes {
			return
		}
		if d.path == current {
			continue
		}
		unlock, ok := tryLock(d.path)
		if !ok {
			continue // another Fetch is using it
		}
		tmp := filepath.Join(cacheDir, evictPrefix+filepath.Base(d.path))
		if os.Rename(d.path, tmp) == nil {
			_ = os.RemoveAll(tmp)
			total -= d.size
		}
		unlock()
	}
}

// dirSize is the total size in bytes of the regular files below dir
// (symbolic links count as their own size, not their targets').
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

package hostpath

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fsSnapshot maps every path under a directory (symlinks not followed) to
// its type, permissions, size, link target and content hash.
type fsSnapshot map[string]string

// snapshot walks dir, skipping the subtrees in skip (absolute paths).
func snapshot(t testing.TB, dir string, skip ...string) fsSnapshot {
	t.Helper()
	s := fsSnapshot{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if slices.Contains(skip, p) {
			return filepath.SkipDir
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		desc := fmt.Sprintf("%v size=%d", st.Mode(), st.Size())
		switch {
		case st.Mode()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + l
		case st.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += fmt.Sprintf(" sha256=%x", sha256.Sum256(b))
		case st.IsDir() && p != dir:
			desc += fmt.Sprintf(" mtime=%d", st.ModTime().UnixNano())
		}
		s[p] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// diff describes what changed from s to o, or "" when nothing did.
func (s fsSnapshot) diff(o fsSnapshot) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(s)) {
		if v, ok := o[k]; !ok {
			fmt.Fprintf(&b, "removed %s (%s)\n", k, s[k])
		} else if v != s[k] {
			fmt.Fprintf(&b, "changed %s: %s => %s\n", k, s[k], v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(o)) {
		if _, ok := s[k]; !ok {
			fmt.Fprintf(&b, "created %s (%s)\n", k, o[k])
		}
	}
	return b.String()
}

// hostileFixture is a base directory with a pool and, beside it, an
// "outside" tree that no driver call may change; the pool holds symlinks
// planted to escape it.
type hostileFixture struct {
	base, pool, outside string
}

// plantedLinks are the pool entries newHostileFixture plants, all pointing
// out of the pool.
var plantedLinks = []string{"escape", "escape-rel", "escape-file", "escape-dotdot"}

func newHostileFixture(t testing.TB) hostileFixture {
	t.Helper()
	base := t.TempDir()
	f := hostileFixture{base: base, pool: filepath.Join(base, "pool"), outside: filepath.Join(base, "outside")}
	for _, d := range []string{f.pool, filepath.Join(f.outside, "data"), filepath.Join(f.outside, "x")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range map[string]string{"victim.txt": "precious\n", "volume.json": `{"id":"escape","pool":"local","state":"Ready","accessType":"mount"}`, "data/keep": "keep\n"} {
		if err := os.WriteFile(filepath.Join(f.outside, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"escape":        f.outside,
		"escape-rel":    "../outside",
		"escape-file":   filepath.Join(f.outside, "victim.txt"),
		"escape-dotdot": "..",
	} {
		if err := os.Symlink(target, filepath.Join(f.pool, link)); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// outsideSnapshot snapshots everything under base except the pool.
func (f hostileFixture) outsideSnapshot(t testing.TB) fsSnapshot {
	return snapshot(t, f.base, f.pool)
}

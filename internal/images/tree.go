package images

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
)

// Tree is the file system of one image layer, keyed by path in the image
// (slash-separated, relative to /, no leading slash): regular files (from
// a file on disk or from bytes), directories and symbolic links. Parents
// missing from the tree are written as directories of mode 0755. Every
// entry records its origin (a Debian package, "converge-node"), so that a
// path added twice with different contents fails naming both.
type Tree struct {
	entries map[string]*entry
	// parents caches every path that has something below it (the
	// directories WriteTar writes when the tree lacks them); nil after an
	// add.
	parents map[string]bool
}

// entry is one path of a Tree.
type entry struct {
	typ    byte        // tar.TypeReg, tar.TypeDir or tar.TypeSymlink
	mode   fs.FileMode // permissions with fs.ModeSetuid, fs.ModeSetgid, fs.ModeSticky
	link   string      // symlink target
	src    string      // file on disk holding a regular file's bytes, or ""
	data   []byte      // a regular file's bytes when src is ""
	size   int64       // a regular file's size
	origin string      // who added it
}

// NewTree gives an empty Tree.
func NewTree() *Tree { return &Tree{entries: map[string]*entry{}} }

// cleanPath checks an image path: relative, slash-separated, clean, not
// "." or "..".
func cleanPath(p string) error {
	if p == "" || p == "." || strings.HasPrefix(p, "/") || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") {
		return fmt.Errorf("image path %q: expected a clean relative path like usr/bin/x", p)
	}
	return nil
}

// add puts e at p, or checks that what is there already is the same: two
// directories (the first mode stays), two symlinks with one target, or
// two regular files with the same bytes and mode.
func (t *Tree) add(p string, e *entry) error {
	if err := cleanPath(p); err != nil {
		return err
	}
	old, ok := t.entries[p]
	if !ok {
		t.entries[p] = e
		t.parents = nil
		return nil
	}
	same := old.typ == e.typ
	switch {
	case !same:
	case e.typ == tar.TypeDir:
		return nil
	case e.typ == tar.TypeSymlink:
		same = old.link == e.link
	default:
		same = old.mode == e.mode && old.size == e.size && sameBytes(old, e)
	}
	if same {
		return nil
	}
	return fmt.Errorf("/%s: added by %s as %s and by %s as %s", p, old.origin, old.describe(), e.origin, e.describe())
}

// describe says what an entry is, for conflict errors.
func (e *entry) describe() string {
	switch e.typ {
	case tar.TypeDir:
		return "a directory"
	case tar.TypeSymlink:
		return "a symlink to " + e.link
	}
	return fmt.Sprintf("a %d-byte file of mode %s", e.size, e.mode)
}

// sameBytes compares two regular files' contents (a read error counts as
// different).
func sameBytes(a, b *entry) bool {
	ha, err1 := a.sum()
	hb, err2 := b.sum()
	return err1 == nil && err2 == nil && ha == hb
}

// sum gives the SHA-256 of a regular file's bytes.
func (e *entry) sum() ([32]byte, error) {
	r, err := e.open()
	if err != nil {
		return [32]byte{}, err
	}
	defer r.Close()
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return [32]byte{}, err
	}
	var s [32]byte
	copy(s[:], h.Sum(nil))
	return s, nil
}

// open gives a regular file's bytes.
func (e *entry) open() (io.ReadCloser, error) {
	if e.src == "" {
		return io.NopCloser(bytes.NewReader(e.data)), nil
	}
	return os.Open(e.src)
}

// File adds a regular file holding data. Modes are fs.FileMode: the
// sticky, setuid and setgid bits are fs.ModeSticky, fs.ModeSetuid and
// fs.ModeSetgid (not 0o1000 and the like, which are dropped).
func (t *Tree) File(p string, data []byte, mode fs.FileMode, origin string) error {
	return t.add(p, &entry{typ: tar.TypeReg, mode: mode & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky), data: data, size: int64(len(data)), origin: origin})
}

// CopyFile adds a regular file whose bytes are those of src on disk (read
// when the layer is written), with mode.
func (t *Tree) CopyFile(p, src string, mode fs.FileMode, origin string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("/%s from %s: %w", p, origin, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("/%s from %s: %s is not a regular file (mode %s)", p, origin, src, fi.Mode())
	}
	return t.add(p, &entry{typ: tar.TypeReg, mode: mode & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky), src: src, size: fi.Size(), origin: origin})
}

// Dir adds a directory.
func (t *Tree) Dir(p string, mode fs.FileMode, origin string) error {
	return t.add(p, &entry{typ: tar.TypeDir, mode: mode & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky), origin: origin})
}

// Symlink adds a symbolic link to target (kept as given, absolute or
// relative).
func (t *Tree) Symlink(p, target, origin string) error {
	if target == "" {
		return fmt.Errorf("/%s from %s: empty symlink target", p, origin)
	}
	return t.add(p, &entry{typ: tar.TypeSymlink, mode: 0o777, link: target, origin: origin})
}

// AddDisk adds everything below the directory root on disk (not root
// itself): directories, regular files and symbolic links with their
// permission bits; owners are not kept (every entry is root's). rename
// maps each slash-separated path relative to root to its image path, or
// to "" to leave the entry (and, for a directory, what it holds) out.
// Other file types (devices, sockets) are an error.
func (t *Tree) AddDisk(root, origin string, rename func(string) string) error {
	return walkSorted(root, "", func(rel string, fi fs.FileInfo) (bool, error) {
		p := rename(rel)
		if p == "" {
			return false, nil
		}
		full := root + "/" + rel
		switch {
		case fi.IsDir():
			return true, t.Dir(p, fi.Mode(), origin)
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(full)
			if err != nil {
				return false, err
			}
			return false, t.Symlink(p, target, origin)
		case fi.Mode().IsRegular():
			return false, t.add(p, &entry{typ: tar.TypeReg, mode: fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky), src: full, size: fi.Size(), origin: origin})
		}
		return false, fmt.Errorf("%s (%s): unsupported file type %s", full, origin, fi.Mode().Type())
	})
}

// walkSorted calls fn for every entry below dir/rel in lexical order; fn
// says whether to descend into a directory.
func walkSorted(dir, rel string, fn func(rel string, fi fs.FileInfo) (bool, error)) error {
	full := dir
	if rel != "" {
		full = dir + "/" + rel
	}
	des, err := os.ReadDir(full)
	if err != nil {
		return err
	}
	for _, de := range des {
		r := de.Name()
		if rel != "" {
			r = rel + "/" + de.Name()
		}
		fi, err := de.Info()
		if err != nil {
			return err
		}
		descend, err := fn(r, fi)
		if err != nil {
			return err
		}
		if descend {
			if err := walkSorted(dir, r, fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// Merge adds every entry of o to t, with the same conflict rules as the
// single adds.
func (t *Tree) Merge(o *Tree) error {
	for _, p := range o.Paths() {
		if err := t.add(p, o.entries[p]); err != nil {
			return err
		}
	}
	return nil
}

// Paths gives every path of the tree, sorted.
func (t *Tree) Paths() []string {
	ps := make([]string, 0, len(t.entries))
	for p := range t.entries {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return ps
}

// Len gives the number of entries WriteTar writes: the tree's and the
// parent directories it implies.
func (t *Tree) Len() int {
	n := len(t.entries)
	t.isParent("")
	for d := range t.parents {
		if _, ok := t.entries[d]; !ok {
			n++
		}
	}
	return n
}

// Resolve follows symbolic links in p, component by component, as the
// kernel would inside the image's root, and gives the path of what p
// names. It fails when a component is missing, a non-directory is walked
// through, or links loop.
func (t *Tree) Resolve(p string) (string, error) {
	return t.resolve(strings.TrimPrefix(p, "/"), 0)
}

func (t *Tree) resolve(p string, hops int) (string, error) {
	cur := ""
	parts := strings.Split(p, "/")
	for i, c := range parts {
		switch c {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			if cur == "." {
				cur = ""
			}
			continue
		}
		next := c
		if cur != "" {
			next = cur + "/" + c
		}
		e, ok := t.entries[next]
		if !ok {
			if t.isParent(next) {
				cur = next // a directory only implied by what is below it
				continue
			}
			return "", fmt.Errorf("/%s: no such file in the image", next)
		}
		if e.typ == tar.TypeSymlink {
			if hops > 40 {
				return "", fmt.Errorf("/%s: too many levels of symbolic links", next)
			}
			target := e.link
			if !strings.HasPrefix(target, "/") {
				target = path.Join(cur, target)
			}
			rest := strings.Join(parts[i+1:], "/")
			if rest != "" {
				target = target + "/" + rest
			}
			return t.resolve(strings.TrimPrefix(target, "/"), hops+1)
		}
		if e.typ != tar.TypeDir && i < len(parts)-1 {
			return "", fmt.Errorf("/%s: not a directory", next)
		}
		cur = next
	}
	return cur, nil
}

// isParent reports whether some path of the tree is below p.
func (t *Tree) isParent(p string) bool {
	if t.parents == nil {
		t.parents = map[string]bool{}
		for q := range t.entries {
			for d := path.Dir(q); d != "." && !t.parents[d]; d = path.Dir(d) {
				t.parents[d] = true
			}
		}
	}
	return t.parents[p]
}

// Open gives the bytes of the regular file p names (after symlinks).
func (t *Tree) Open(p string) (io.ReadCloser, error) {
	r, err := t.Resolve(p)
	if err != nil {
		return nil, err
	}
	e := t.entries[r]
	if e == nil || e.typ != tar.TypeReg {
		return nil, fmt.Errorf("/%s: not a regular file", r)
	}
	return e.open()
}

// Exists reports whether p names something in the image (after symlinks).
func (t *Tree) Exists(p string) bool {
	_, err := t.Resolve(p)
	return err == nil
}

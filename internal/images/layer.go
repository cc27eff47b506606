package images

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// WriteTar writes t as an uncompressed tar: entries sorted by path, each
// missing parent directory first as mode 0755, every time set to epoch,
// owner and group 0 with no names. It fails when a path has a
// non-directory among its parents.
func (t *Tree) WriteTar(w io.Writer, epoch time.Time) error {
	tw := tar.NewWriter(w)
	written := map[string]bool{}
	epoch = epoch.UTC().Truncate(time.Second)
	for _, p := range t.Paths() {
		if err := t.writeParents(tw, p, epoch, written); err != nil {
			return err
		}
		if err := t.writeEntry(tw, p, t.entries[p], epoch); err != nil {
			return err
		}
		written[p] = true
	}
	return tw.Close()
}

// writeParents writes the directories above p that are not in the tree
// and not written yet; one that is in the tree must be a directory.
func (t *Tree) writeParents(tw *tar.Writer, p string, epoch time.Time, written map[string]bool) error {
	var missing []string
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if e, ok := t.entries[d]; ok {
			if e.typ != tar.TypeDir {
				return fmt.Errorf("/%s (%s): its parent /%s (%s) is %s, not a directory", p, t.entries[p].origin, d, e.origin, e.describe())
			}
			continue
		}
		if !written[d] {
			missing = append(missing, d)
		}
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := t.writeEntry(tw, missing[i], &entry{typ: tar.TypeDir, mode: 0o755}, epoch); err != nil {
			return err
		}
		written[missing[i]] = true
	}
	return nil
}

// writeEntry writes one header and, for a regular file, its bytes, which
// must still have the size recorded when it was added.
func (t *Tree) writeEntry(tw *tar.Writer, p string, e *entry, epoch time.Time) error {
	hdr := &tar.Header{
		Typeflag: e.typ,
		Name:     p,
		Linkname: e.link,
		Mode:     tarMode(e.mode),
		ModTime:  epoch,
	}
	switch e.typ {
	case tar.TypeDir:
		hdr.Name += "/"
	case tar.TypeReg:
		hdr.Size = e.size
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("/%s: %w", p, err)
	}
	if e.typ != tar.TypeReg {
		return nil
	}
	r, err := e.open()
	if err != nil {
		return fmt.Errorf("/%s (%s): %w", p, e.origin, err)
	}
	defer r.Close()
	n, err := io.Copy(tw, r)
	if err != nil {
		return fmt.Errorf("/%s (%s): %w", p, e.origin, err)
	}
	if n != e.size {
		return fmt.Errorf("/%s (%s): %s changed size while building (%d bytes, was %d)", p, e.origin, e.src, n, e.size)
	}
	return nil
}

// tarMode gives the tar header mode of permissions and special bits.
func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

// Layer writes t as a gzip-compressed tar (WriteTar) at file, with a gzip
// header holding no name and no time, and gives the layer
// go-containerregistry reads back from it (digest, diff ID and size
// computed from the file). level is a compress/gzip level.
func (t *Tree) Layer(file string, epoch time.Time, level int) (v1.Layer, error) {
	if err := writeAtomic(file, func(w io.Writer) error {
		zw, err := gzip.NewWriterLevel(w, level)
		if err != nil {
			return err
		}
		if err := t.WriteTar(zw, epoch); err != nil {
			return err
		}
		return zw.Close()
	}); err != nil {
		return nil, err
	}
	return tarball.LayerFromFile(file)
}

// writeAtomic writes file through fill into a temporary file beside it,
// then renames it into place; on error nothing is left behind.
func writeAtomic(file string, fill func(io.Writer) error) (err error) {
	dir, base := path.Split(file)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+strings.TrimPrefix(base, ".")+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := fill(bw); err != nil {
		return fmt.Errorf("writing %s: %w", file, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing %s: %w", file, err)
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", file, err)
	}
	return os.Rename(f.Name(), file)
}

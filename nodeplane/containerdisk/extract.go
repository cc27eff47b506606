package containerdisk

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// DiskDir is where KubeVirt and CDI look for the disk when no path is
// given: the single file under /disk/ (KubeVirt's pkg/container-disk
// GetImage, DiskSourceFallbackPath; CDI's containerDiskImageDir).
const DiskDir = "disk"

// LayoutError is an image that is not laid out as a containerDisk (no
// disk, several, not a regular file): pulling it again gives the same
// image.
type LayoutError struct {
	// Path is the path asked for, "" for the single file under /disk/.
	Path string
	// Found are the entries found where the disk was expected (none, or
	// more than one).
	Found []string
	msg   string
}

func (e *LayoutError) Error() string { return e.msg }

// Disk calls fn with the disk of img: the file at p (clean, relative to
// the image's root) in the image's flattened filesystem, or with p "" the
// single entry under /disk/, refusing none or several, as KubeVirt. fn
// gets the file's tar header and its content, which it must read before
// returning. Layout errors are *LayoutError; others are the layers' reads
// (the registry) or fn's.
func Disk(ctx context.Context, img v1.Image, p string, fn func(hdr *tar.Header, r io.Reader) error) error {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(&ctxReader{ctx: ctx, r: rc})
	var found []string
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("reading the image's layers: %w", err)
		}
		n := strings.TrimPrefix(path.Clean("/"+hdr.Name), "/")
		if p != "" && n != p || p == "" && path.Dir(n) != DiskDir {
			continue
		}
		found = append(found, "/"+n)
		if len(found) > 1 {
			return &LayoutError{Path: p, Found: found, msg: fmt.Sprintf("more than one entry under /%s/ (%s)", DiskDir, strings.Join(found, ", "))}
		}
		if hdr.Typeflag != tar.TypeReg {
			return &LayoutError{Path: p, Found: found, msg: fmt.Sprintf("/%s is not a regular file (tar type %q)", n, hdr.Typeflag)}
		}
		if err := fn(hdr, tr); err != nil {
			return fmt.Errorf("/%s: %w", n, err)
		}
	}
	switch {
	case len(found) == 1:
		return nil
	case p != "":
		return &LayoutError{Path: p, msg: fmt.Sprintf("no file /%s in the image", p)}
	}
	return &LayoutError{msg: fmt.Sprintf("no file under /%s/ in the image", DiskDir)}
}

// ctxReader ends a read once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r *ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

// sparseBlock is the hole granularity of WriteSparse.
const sparseBlock = 4096

// WriteSparse copies r into a new file dst, leaving 4 KiB blocks of zeros
// as holes (a raw disk is mostly zeros), and syncs it.
func WriteSparse(dst string, r io.Reader) error {
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 256*sparseBlock)
	var zero [sparseBlock]byte
	var off int64
	for {
		n, rerr := io.ReadFull(r, buf)
		for i := 0; i < n; i += sparseBlock {
			end := min(i+sparseBlock, n)
			if bytes.Equal(buf[i:end], zero[:end-i]) {
				continue
			}
			if _, err := f.WriteAt(buf[i:end], off+int64(i)); err != nil {
				return err
			}
		}
		off += int64(n)
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	if err := f.Truncate(off); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}

package importer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Clone copies the raw image at src (the disk of a hostpath volume on this
// node: a Filesystem volume's disk.img or a Block volume's backing file)
// to dst.Path as CDI's host-assisted clone does (its source pod streams
// the volume, its target pod writes it), here in one process and sparse:
// only the data extents of src are read (lseek SEEK_DATA/SEEK_HOLE), zero
// 4 KiB blocks within them stay holes, and the copy is grown to
// dst.SizeBytes (opts.Resize) with fsync and rename as Import places a
// download. A source larger than dst.SizeBytes is ReasonTooBig; src is
// opened without following a final symlink. Progress counts the bytes of
// the source's extents copied. On error dst.Path is unchanged.
func Clone(ctx context.Context, src string, dst Target, opts Options) (Result, error) {
	label := "clone of " + src
	fail := func(r Reason, retry bool, format string, args ...any) (Result, error) {
		return Result{}, newError(label, r, retry, format, args...)
	}
	in, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return fail(ReasonNotFound, false, "source: %w", err)
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return fail(ReasonInvalidInput, false, "source: expected a regular file (%v)", err)
	}
	size := st.Size()
	if dst.SizeBytes > 0 && size > dst.SizeBytes {
		return fail(ReasonTooBig, false, "source image of %d bytes is larger than the volume size %d of %s; a larger PVC is required", size, dst.SizeBytes, dst.Path)
	}
	extents, total, err := dataExtents(in, size)
	if err != nil {
		return fail(ReasonWriteFailed, true, "source extents: %w", err)
	}
	out, err := os.CreateTemp(filepath.Dir(dst.Path), "."+filepath.Base(dst.Path)+".clone-*")
	if err != nil {
		return fail(ReasonWriteFailed, true, "temporary file: %w", err)
	}
	placed := false
	defer func() {
		out.Close()
		if !placed {
			os.Remove(out.Name())
		}
	}()
	rep := newReporter(opts.Progress, opts.ProgressInterval)
	w := &sparseWriter{f: out}
	var done int64
	buf := make([]byte, 1<<20)
	for _, e := range extents {
		w.off = e[0]
		r := io.NewSectionReader(in, e[0], e[1]-e[0])
		for {
			if err := ctx.Err(); err != nil {
				return fail(ReasonCanceled, false, "%w", err)
			}
			n, rerr := r.Read(buf)
			if n > 0 {
				if _, err := w.Write(buf[:n]); err != nil {
					return fail(ReasonWriteFailed, true, "write %s: %w", out.Name(), err)
				}
				done += int64(n)
				rep.update(done, total, 99*float64(done)/float64(max(total, 1)), false)
			}
			if errors.Is(rerr, io.EOF) {
				break
			}
			if rerr != nil {
				return fail(ReasonWriteFailed, true, "read %s: %w", src, rerr)
			}
		}
	}
	final := size
	if opts.Resize && dst.SizeBytes > final {
		final = dst.SizeBytes
	}
	if err := place(out, final, dst.Path, false); err != nil {
		return fail(ReasonWriteFailed, true, "%w", err)
	}
	placed = true
	rep.update(total, total, 100, true)
	return Result{Format: "raw", DownloadedBytes: done, VirtualSize: size, SizeBytes: final, Attempts: 1}, nil
}

// dataExtents gives the [start, end) ranges of f's data (SEEK_DATA and
// SEEK_HOLE; a file system without them reports one extent, the whole
// file) and their total length.
func dataExtents(f *os.File, size int64) ([][2]int64, int64, error) {
	var out [][2]int64
	var total int64
	fd := int(f.Fd())
	for off := int64(0); off < size; {
		start, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole after off
		}
		if err != nil {
			return [][2]int64{{0, size}}, size, nil //nolint:nilerr // no SEEK_DATA: copy it all
		}
		end, err := unix.Seek(fd, start, unix.SEEK_HOLE)
		if err != nil {
			return nil, 0, fmt.Errorf("SEEK_HOLE at %d: %w", start, err)
		}
		end = min(end, size)
		out = append(out, [2]int64{start, end})
		total += end - start
		off = end
	}
	return out, total, nil
}

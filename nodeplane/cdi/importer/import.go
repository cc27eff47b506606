package importer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
)

// Import fetches src and places it at dst.Path as a sparse raw image,
// following CDI's importer (see the package doc for the steps). It returns
// what was imported, or an *Error naming the cause (use ReasonOf and
// IsRetryable); on error no temporary file remains and dst.Path is
// unchanged. opts is usually DefaultOptions() with changes.
func Import(ctx context.Context, src Source, dst Target, opts Options) (Result, error) {
	u, perr := url.Parse(src.URL)
	if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Result{}, newError(src.URL, ReasonInvalidInput, false, "expected an http:// or https:// URL with a host")
	}
	sum, perr := parseChecksum(src.Checksum)
	if perr != nil {
		return Result{}, newError(src.URL, ReasonInvalidInput, false, "%w", perr)
	}
	client, cerr := httpClient(src)
	if cerr != nil {
		return Result{}, newError(src.URL, ReasonInvalidInput, false, "%w", cerr)
	}
	return importInto(ctx, src.URL, sum, dst, opts, func(f *os.File, limit int64, rep *reporter) (download, error) {
		return fetch(ctx, client, src, f, sum, limit, opts, rep)
	})
}

// ImportReader is Import for an image given as a stream (the body of an
// upload, CDI's cdi-uploadserver): r is read once, to its end, size bytes
// (-1: unknown; a stream ending at another length fails with
// ReasonUnreachable), and the same steps follow: the body limit of
// dst.SizeBytes, the refusal of text/HTML, qemu-img info, conversion to
// raw, sparse placement, progress. The body is spooled to a temporary
// file next to dst.Path first, because qemu-img needs a seekable file.
// Nothing is retried (opts.Retries, Timeout and Backoff are not used): a
// read error of r fails with ReasonUnreachable, not retryable. Errors are
// *Error values whose URL is "stream to <dst.Path>"; ctx ends the read.
func ImportReader(ctx context.Context, r io.Reader, size int64, dst Target, opts Options) (Result, error) {
	label := "stream to " + dst.Path
	return importInto(ctx, label, nil, dst, opts, func(f *os.File, limit int64, rep *reporter) (download, error) {
		readErr := func(err error, during string) *Error {
			if ctx.Err() != nil {
				return newError(label, ReasonCanceled, false, "%s: %w", during, ctx.Err())
			}
			return newError(label, ReasonUnreachable, false, "%s: %w", during, err)
		}
		d, err := copyBody(label, &ctxReader{ctx: ctx, r: r}, size, "", f, nil, limit, rep, readErr)
		d.attempts = 1
		if err != nil {
			return d, err
		}
		return d, nil
	})
}

// ctxReader fails reads once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// importInto runs the steps after the source is known: fill writes the
// image into a temporary file next to dst.Path (limit > 0 bounds it), then
// checksum (sum, optional), qemu-img info, checks, conversion and
// placement. label names the source in errors.
func importInto(ctx context.Context, label string, sum *checksum, dst Target, opts Options, fill func(f *os.File, limit int64, rep *reporter) (download, error)) (res Result, err error) {
	fail := func(r Reason, retry bool, format string, args ...any) (Result, error) {
		return Result{}, newError(label, r, retry, format, args...)
	}
	if !filepath.IsAbs(dst.Path) {
		return fail(ReasonInvalidInput, false, "target %q: expected an absolute path", dst.Path)
	}
	if st, serr := os.Stat(dst.Path); serr == nil && !st.Mode().IsRegular() {
		return fail(ReasonInvalidInput, false, "target %s: expected a regular file (block devices are not supported yet)", dst.Path)
	}
	if opts.QemuImg == "" {
		opts.QemuImg = "qemu-img"
	}
	if _, lerr := exec.LookPath(opts.QemuImg); lerr != nil {
		return fail(ReasonWriteFailed, false, "qemu-img (Debian package qemu-utils): %w", lerr)
	}
	rep := newReporter(opts.Progress, opts.ProgressInterval)

	dir := filepath.Dir(dst.Path)
	base := filepath.Base(dst.Path)
	dl, terr := os.CreateTemp(dir, "."+base+".download-*")
	if terr != nil {
		return fail(ReasonWriteFailed, true, "temporary file in %s: %w", dir, terr)
	}
	temps := []string{dl.Name()}
	defer func() {
		if dl != nil {
			dl.Close()
		}
		for _, t := range temps {
			if rerr := os.Remove(t); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
				err = newError(label, ReasonWriteFailed, true, "remove temporary %s: %w", t, rerr)
			}
		}
	}()

	d, ferr := fill(dl, bodyLimit(dst.SizeBytes), rep)
	res.Attempts = d.attempts
	if ferr != nil {
		return res, ferr
	}
	res.DownloadedBytes = d.bytes
	if sum != nil {
		if verr := sum.verify(); verr != nil {
			return res, newError(label, ReasonChecksumMismatch, false, "%w", verr)
		}
		res.Checksum = sum.String()
	}

	info, ierr := qemuInfo(ctx, opts.QemuImg, dl.Name())
	if ierr != nil {
		return res, newError(label, ReasonNotAnImage, false, "qemu-img cannot read the %d downloaded bytes: %w", d.bytes, ierr)
	}
	res.Format, res.VirtualSize = info.Format, info.VirtualSize
	if info.BackingFilename != "" {
		return res, newError(label, ReasonNotAnImage, false, "%s image has backing file %q; expected a self-contained image", info.Format, info.BackingFilename)
	}
	if _, ok := info.FormatSpecific.Data["data-file"]; ok {
		return res, newError(label, ReasonNotAnImage, false, "%s image has an external data file; expected a self-contained image", info.Format)
	}
	if dst.SizeBytes > 0 && info.VirtualSize > dst.SizeBytes {
		return res, newError(label, ReasonTooBig, false, "virtual image size %d is larger than the volume size %d of %s; a larger PVC is required", info.VirtualSize, dst.SizeBytes, dst.Path)
	}

	out := dl
	if info.Format != "raw" {
		raw, rerr := os.CreateTemp(dir, "."+base+".raw-*")
		if rerr != nil {
			return res, newError(label, ReasonWriteFailed, true, "temporary file in %s: %w", dir, rerr)
		}
		temps = append(temps, raw.Name())
		raw.Close()
		start := rep.percent()
		if start < 50 {
			start = 50
		}
		onPercent := func(p float64) { rep.update(d.bytes, d.bytes, start+(99-start)*p/100, false) }
		if cerr := qemuConvertRaw(ctx, opts.QemuImg, info.Format, dl.Name(), raw.Name(), onPercent); cerr != nil {
			if ctx.Err() != nil {
				return res, newError(label, ReasonCanceled, false, "%w", ctx.Err())
			}
			return res, newError(label, ReasonWriteFailed, true, "%w", cerr)
		}
		dl.Close()
		dl = nil
		os.Remove(temps[0])
		temps = temps[1:]
		if out, rerr = os.OpenFile(raw.Name(), os.O_RDWR, 0); rerr != nil {
			return res, newError(label, ReasonWriteFailed, true, "%w", rerr)
		}
		defer out.Close()
	}
	size := info.VirtualSize
	if opts.Resize && dst.SizeBytes > size {
		size = dst.SizeBytes
	}
	if perr := place(out, size, dst.Path); perr != nil {
		return res, newError(label, ReasonWriteFailed, true, "%w", perr)
	}
	temps = nil
	res.SizeBytes = size
	rep.update(d.bytes, d.bytes, 100, true)
	return res, nil
}

// place sets f's length to size (holes), fsyncs it, renames it to path and
// fsyncs the directory.
func place(f *os.File, size int64, path string) error {
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("resize %s to %d bytes: %w", f.Name(), size, err)
	}
	if err := f.Chmod(0o660); err != nil {
		return fmt.Errorf("chmod %s: %w", f.Name(), err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", f.Name(), err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("rename %s to %s: %w", f.Name(), path, err)
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("fsync directory of %s: %w", path, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync directory of %s: %w", path, err)
	}
	return nil
}

// bodyLimit is the largest download accepted for a volume of size bytes
// (0: no limit): the size plus 1% and 64 MiB for image metadata (qcow2
// tables, VMDK/VHD headers), so a server cannot fill the node's disk.
func bodyLimit(size int64) int64 {
	if size <= 0 {
		return 0
	}
	return size + size/100 + 64<<20
}

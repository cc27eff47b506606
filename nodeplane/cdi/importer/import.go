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
	return importInto(ctx, src.URL, sum, dst, opts, func(f *spool, limit int64, rep *reporter) (download, error) {
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
	return importInto(ctx, label, nil, dst, opts, func(f *spool, limit int64, rep *reporter) (download, error) {
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
//
// A qcow2 body of known length is converted while it downloads: qemu-img
// info and convert read it over NBD from the temporary file, each read
// waiting for its bytes (see spool, serveNBD). That result is used only
// if the download then completes, in one attempt, and its checksum
// matches; otherwise (a retry, or any failure of the streamed steps) info,
// checks and conversion run again on the complete file, as for other
// formats, so their errors name the downloaded file.
func importInto(ctx context.Context, label string, sum *checksum, dst Target, opts Options, fill func(f *spool, limit int64, rep *reporter) (download, error)) (res Result, err error) {
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
	// rawTemp makes an empty temporary file for the raw image.
	rawTemp := func() (string, error) {
		raw, rerr := os.CreateTemp(dir, "."+base+".raw-*")
		if rerr != nil {
			return "", fmt.Errorf("temporary file in %s: %w", dir, rerr)
		}
		temps = append(temps, raw.Name())
		if cerr := raw.Chmod(0o660); cerr != nil {
			raw.Close()
			return "", fmt.Errorf("chmod %s: %w", raw.Name(), cerr)
		}
		return raw.Name(), raw.Close()
	}
	convertPercent := func(bytes int64) func(float64) {
		start := rep.percent()
		if start < 50 {
			start = 50
		}
		return func(p float64) { rep.update(bytes, bytes, start+(99-start)*p/100, false) }
	}

	sp := newSpool(dl)
	type filled struct {
		d   download
		err error
	}
	fillDone := make(chan filled, 1)
	go func() {
		d, ferr := fill(sp, bodyLimit(dst.SizeBytes), rep)
		sp.end(ferr)
		fillDone <- filled{d, ferr}
	}()
	var fr filled
	var streamed *streamResult
	select {
	case <-sp.start:
		if sp.qcow2 && sp.total > 0 {
			streamed = convertStreamed(ctx, opts.QemuImg, sp, dst.SizeBytes, rawTemp, convertPercent(sp.total))
		}
		fr = <-fillDone
		if streamed != nil && streamed.export != nil {
			streamed.export.Close()
		}
	case fr = <-fillDone:
	}
	d := fr.d
	res.Attempts = d.attempts
	if fr.err != nil {
		return res, fr.err
	}
	res.DownloadedBytes = d.bytes
	if sum != nil {
		if verr := sum.verify(); verr != nil {
			return res, newError(label, ReasonChecksumMismatch, false, "%w", verr)
		}
		res.Checksum = sum.String()
	}

	var info imageInfo
	rawPath := ""
	if streamed != nil && streamed.err == nil && !sp.stale() {
		info, rawPath = streamed.info, streamed.raw
	} else {
		var ierr error
		if info, ierr = qemuInfo(ctx, opts.QemuImg, dl.Name()); ierr != nil {
			return res, newError(label, ReasonNotAnImage, false, "qemu-img cannot read the %d downloaded bytes: %w", d.bytes, ierr)
		}
		if cerr := checkInfo(info, dst); cerr != nil {
			return res, newError(label, cerr.reason, false, "%s", cerr.msg)
		}
		if info.Format != "raw" {
			name, rerr := rawTemp()
			if rerr != nil {
				return res, newError(label, ReasonWriteFailed, true, "%w", rerr)
			}
			if cerr := qemuConvertRaw(ctx, opts.QemuImg, info.Format, dl.Name(), name, convertPercent(d.bytes)); cerr != nil {
				if ctx.Err() != nil {
					return res, newError(label, ReasonCanceled, false, "%w", ctx.Err())
				}
				return res, newError(label, ReasonWriteFailed, true, "%w", cerr)
			}
			rawPath = name
		}
	}
	res.Format, res.VirtualSize = info.Format, info.VirtualSize

	out := dl
	if rawPath != "" {
		dl.Close()
		dl = nil
		os.Remove(temps[0])
		temps = temps[1:]
		var rerr error
		if out, rerr = os.OpenFile(rawPath, os.O_RDWR, 0); rerr != nil {
			return res, newError(label, ReasonWriteFailed, true, "%w", rerr)
		}
		defer out.Close()
	}
	size := info.VirtualSize
	if opts.Resize && dst.SizeBytes > size {
		size = dst.SizeBytes
	}
	// qemu-img convert -t writeback ends with fdatasync of its output, so
	// a converted image of the final size needs no second one.
	flushed := rawPath != "" && size == info.VirtualSize
	if perr := place(out, size, dst.Path, flushed); perr != nil {
		return res, newError(label, ReasonWriteFailed, true, "%w", perr)
	}
	// The placed file is renamed away; the deferred removal drops the
	// others (a streamed conversion's raw image discarded for the
	// sequential one).
	res.SizeBytes = size
	rep.update(d.bytes, d.bytes, 100, true)
	return res, nil
}

// infoRefusal is why checkInfo refuses an image.
type infoRefusal struct {
	reason Reason
	msg    string
}

// checkInfo refuses an image with a backing file or an external data file
// (either would let the image read host files) or a virtual size larger
// than dst.SizeBytes (> 0).
func checkInfo(info imageInfo, dst Target) *infoRefusal {
	if info.BackingFilename != "" {
		return &infoRefusal{ReasonNotAnImage, fmt.Sprintf("%s image has backing file %q; expected a self-contained image", info.Format, info.BackingFilename)}
	}
	if _, ok := info.FormatSpecific.Data["data-file"]; ok {
		return &infoRefusal{ReasonNotAnImage, fmt.Sprintf("%s image has an external data file; expected a self-contained image", info.Format)}
	}
	if dst.SizeBytes > 0 && info.VirtualSize > dst.SizeBytes {
		return &infoRefusal{ReasonTooBig, fmt.Sprintf("virtual image size %d is larger than the volume size %d of %s; a larger PVC is required", info.VirtualSize, dst.SizeBytes, dst.Path)}
	}
	return nil
}

// streamResult is the outcome of convertStreamed.
type streamResult struct {
	export *nbdExport // to Close once the fill is over
	info   imageInfo
	raw    string // the converted raw temporary
	err    error
}

// convertStreamed runs qemu-img info, checkInfo and qemu-img convert on a
// qcow2 spool while it is still being written, reading it through an NBD
// export of its sp.total bytes; rawTemp gives the output file.
//
// qemu-img convert (-f qcow2, as the magic says) starts together with
// info, on the export's gated name: its reads wait until info and
// checkInfo passed, and fail if they did not (then it is also killed), so
// it never reads an image that was refused, while its process start
// overlaps info's.
func convertStreamed(ctx context.Context, bin string, sp *spool, volumeSize int64, rawTemp func() (string, error), onPercent func(float64)) *streamResult {
	exp, err := serveNBD(sp, sp.total)
	if err != nil {
		return &streamResult{err: err}
	}
	r := &streamResult{export: exp}
	if r.raw, r.err = rawTemp(); r.err != nil {
		exp.open(r.err)
		return r
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	converted := make(chan error, 1)
	go func() { converted <- qemuConvertRaw(cctx, bin, "qcow2", exp.GatedURI, r.raw, onPercent) }()
	check := func() error {
		var err error
		if r.info, err = qemuInfo(ctx, bin, exp.URI); err != nil {
			return err
		}
		if r.info.Format != "qcow2" {
			return fmt.Errorf("streamed image is %s, expected qcow2", r.info.Format)
		}
		if ref := checkInfo(r.info, Target{SizeBytes: volumeSize}); ref != nil {
			return errors.New(ref.msg)
		}
		return nil
	}
	if r.err = check(); r.err != nil {
		exp.open(r.err)
		cancel()
		<-converted
		return r
	}
	exp.open(nil)
	r.err = <-converted
	return r
}

// place sets f's length to size (holes), fsyncs it, renames it to path and
// fsyncs the directory. flushed says f already has length size, mode 0660
// and its data on disk (qemu-img convert flushed it): then only the rename
// and the directory fsync remain.
func place(f *os.File, size int64, path string, flushed bool) error {
	if !flushed {
		if err := f.Truncate(size); err != nil {
			return fmt.Errorf("resize %s to %d bytes: %w", f.Name(), size, err)
		}
		if err := f.Chmod(0o660); err != nil {
			return fmt.Errorf("chmod %s: %w", f.Name(), err)
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("fsync %s: %w", f.Name(), err)
		}
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

package importer

import (
	"context"
	"errors"
	"fmt"
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
func Import(ctx context.Context, src Source, dst Target, opts Options) (res Result, err error) {
	fail := func(r Reason, retry bool, format string, args ...any) (Result, error) {
		return Result{}, newError(src.URL, r, retry, format, args...)
	}
	u, perr := url.Parse(src.URL)
	if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fail(ReasonInvalidInput, false, "expected an http:// or https:// URL with a host")
	}
	sum, perr := parseChecksum(src.Checksum)
	if perr != nil {
		return fail(ReasonInvalidInput, false, "%w", perr)
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
	client, cerr := httpClient(src)
	if cerr != nil {
		return fail(ReasonInvalidInput, false, "%w", cerr)
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
				err = newError(src.URL, ReasonWriteFailed, true, "remove temporary %s: %w", t, rerr)
			}
		}
	}()

	d, ferr := fetch(ctx, client, src, dl, sum, bodyLimit(dst.SizeBytes), opts, rep)
	res.Attempts = d.attempts
	if ferr != nil {
		return res, ferr
	}
	res.DownloadedBytes = d.bytes
	if sum != nil {
		if verr := sum.verify(); verr != nil {
			return res, newError(src.URL, ReasonChecksumMismatch, false, "%w", verr)
		}
		res.Checksum = sum.String()
	}

	info, ierr := qemuInfo(ctx, opts.QemuImg, dl.Name())
	if ierr != nil {
		return res, newError(src.URL, ReasonNotAnImage, false, "qemu-img cannot read the %d downloaded bytes: %w", d.bytes, ierr)
	}
	res.Format, res.VirtualSize = info.Format, info.VirtualSize
	if info.BackingFilename != "" {
		return res, newError(src.URL, ReasonNotAnImage, false, "%s image has backing file %q; expected a self-contained image", info.Format, info.BackingFilename)
	}
	if _, ok := info.FormatSpecific.Data["data-file"]; ok {
		return res, newError(src.URL, ReasonNotAnImage, false, "%s image has an external data file; expected a self-contained image", info.Format)
	}
	if dst.SizeBytes > 0 && info.VirtualSize > dst.SizeBytes {
		return res, newError(src.URL, ReasonTooBig, false, "virtual image size %d is larger than the volume size %d of %s; a larger PVC is required", info.VirtualSize, dst.SizeBytes, dst.Path)
	}

	out := dl
	if info.Format != "raw" {
		raw, rerr := os.CreateTemp(dir, "."+base+".raw-*")
		if rerr != nil {
			return res, newError(src.URL, ReasonWriteFailed, true, "temporary file in %s: %w", dir, rerr)
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
				return res, newError(src.URL, ReasonCanceled, false, "%w", ctx.Err())
			}
			return res, newError(src.URL, ReasonWriteFailed, true, "%w", cerr)
		}
		dl.Close()
		dl = nil
		os.Remove(temps[0])
		temps = temps[1:]
		if out, rerr = os.OpenFile(raw.Name(), os.O_RDWR, 0); rerr != nil {
			return res, newError(src.URL, ReasonWriteFailed, true, "%w", rerr)
		}
		defer out.Close()
	}
	size := info.VirtualSize
	if opts.Resize && dst.SizeBytes > size {
		size = dst.SizeBytes
	}
	if perr := place(out, size, dst.Path); perr != nil {
		return res, newError(src.URL, ReasonWriteFailed, true, "%w", perr)
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

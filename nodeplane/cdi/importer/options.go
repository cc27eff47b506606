package importer

import "time"

// Source is where the image comes from: the DataVolume's spec.source.http.
type Source struct {
	// URL is the http:// or https:// address of the image.
	URL string
	// CA is an optional PEM bundle trusted for https, in place of the
	// system roots (CDI's certConfigMap).
	CA []byte
	// Checksum is optional, "sha256:<64 hex>" (also sha512, sha1, md5 as
	// CDI accepts), verified over the downloaded bytes before anything is
	// written to the target.
	Checksum string
}

// Target is where the raw image goes.
type Target struct {
	// Path is the absolute path of the disk image file: for a filesystem
	// volume <data dir>/disk.img, as CDI writes. Its directory must exist;
	// temporary files are made there so the final rename is atomic.
	Path string
	// SizeBytes is the volume (PVC) size in bytes. An image whose virtual
	// size is larger is refused with ReasonTooBig, and so is a body larger
	// than SizeBytes + 1% + 64 MiB (stopped while downloading, so a server
	// cannot fill the node's disk). Zero disables both checks.
	SizeBytes int64
}

// Progress is one progress report.
type Progress struct {
	// Bytes is the number of bytes downloaded so far.
	Bytes int64
	// Total is the Content-Length, or -1 if the server gave none.
	Total int64
	// Percent is in [0, 100], never decreasing within one Import, and 100
	// exactly once, when the image is in place. For images that need
	// conversion (qcow2 magic seen) the download counts for 0–50 and
	// qemu-img convert -p for 50–100; for raw the download counts for
	// 0–99. With no Content-Length it stays 0 until conversion or the end.
	Percent float64
}

// String formats Percent like CDI's DataVolume status.progress ("45.00%").
func (p Progress) String() string { return formatPercent(p.Percent) }

// Options tunes Import. Use DefaultOptions and change fields.
type Options struct {
	// Progress, if set, is called from Import's goroutine with reports at
	// most every ProgressInterval, and always at the end of the download
	// and when the image is in place.
	Progress func(Progress)
	// ProgressInterval is the minimum time between two reports.
	ProgressInterval time.Duration
	// Timeout bounds one download attempt (connect to end of body). A
	// server that stops sending fails the attempt with ReasonTimeout.
	Timeout time.Duration
	// Retries is how many times a retryable download failure is retried
	// (so Retries+1 attempts).
	Retries int
	// Backoff is the wait before the first retry, doubled each time up to
	// MaxBackoff.
	Backoff, MaxBackoff time.Duration
	// Resize grows the raw result to Target.SizeBytes (sparse), as CDI
	// does for filesystem volumes, so the guest sees the whole PVC.
	Resize bool
	// QemuImg is the qemu-img binary (name on PATH or absolute path).
	QemuImg string
}

// DefaultOptions gives: no progress callback, 1 s progress interval, 1 h
// attempt timeout, 3 retries with backoff 1 s doubling to 30 s, Resize on,
// qemu-img from PATH.
func DefaultOptions() Options {
	return Options{
		ProgressInterval: time.Second,
		Timeout:          time.Hour,
		Retries:          3,
		Backoff:          time.Second,
		MaxBackoff:       30 * time.Second,
		Resize:           true,
		QemuImg:          "qemu-img",
	}
}

// Result describes a successful import.
type Result struct {
	// Format is the source format qemu-img detected ("raw", "qcow2", ...).
	Format string
	// DownloadedBytes is the size of the body received.
	DownloadedBytes int64
	// VirtualSize is the image's virtual size in bytes.
	VirtualSize int64
	// SizeBytes is the size of the file at Target.Path (VirtualSize, or
	// Target.SizeBytes after Resize).
	SizeBytes int64
	// Attempts is the number of download attempts made.
	Attempts int
	// Checksum is the verified "algo:hex" ("" if none was asked).
	Checksum string
}

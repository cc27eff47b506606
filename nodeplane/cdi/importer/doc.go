// Package importer is converge's CDI importer role: it fetches a VM disk
// image over HTTP(S) and writes it, as a sparse raw file, to a volume's disk
// image path (for a filesystem volume of nodeplane/csi/hostpath that is
// <pool>/<id>/data/disk.img, the file name CDI uses).
//
// It follows kubevirt/containerized-data-importer (CDI): pkg/importer
// (http-datasource.go for the HTTP source, checksum.go for the
// "algorithm:hex" checksum, errors.go for ValidationSizeError) and
// pkg/image/qemu.go, which shells out to qemu-img for `info`, `convert`
// (with -p progress) and the size validation. Like CDI, every format is
// converted to raw and the raw file is grown to the volume size.
//
// Steps of Import: download to a temporary file in the target's directory
// (zero 4 KiB blocks become holes, the checksum is computed on the fly,
// retrying transient failures with backoff), verify the checksum, refuse
// text/HTML bodies, `qemu-img info` (refusing backing files and external
// data files, which would let an image read host files), refuse a virtual
// size larger than the volume, convert to raw (qcow2 and other formats) or
// keep the download (raw), grow to the volume size, fsync and rename over
// Target.Path. On any error the temporary files are removed and Target.Path
// is left as it was.
//
// A qcow2 body of known length is converted while it downloads, as CDI
// streams it through nbdkit into qemu-img (pkg/image/nbdkit.go): the
// temporary file is exported read-only over NBD on a private Unix socket
// (github.com/pojntfx/go-nbd), each read waiting until the download has
// written its bytes, and qemu-img info, the checks and qemu-img convert
// run on that export. convert starts with info, on a gated name of the
// export whose reads wait until the checks passed (and fail if they did
// not), so its process start overlaps info's but it reads nothing of a
// refused image. The output is used only once the download has
// completed in a single attempt and its checksum matched; after a retry,
// or any failure of the streamed steps, info, checks and convert run again
// on the complete file. qemu-img convert flushes its output, so a
// converted image of the final size is renamed without another fsync.
//
// The disk writes overlap the download: while a raw body is written to
// the temporary file, and while qemu-img convert writes its output, the
// importer starts their writeback (sync_file_range
// SYNC_FILE_RANGE_WRITE, see flusher), so the final fsync or fdatasync
// waits for the last pages only. A qcow2 temporary, removed after the
// conversion, is never written back.
//
// ImportRegistry runs the same steps on the disk of a containerDisk image
// (CDI's pkg/importer/registry-datasource.go): pulled with
// go-containerregistry (nodeplane/containerdisk, shared with the VM
// agent's containerDisk volumes), or read from an OCI archive in a node
// directory, its single file under /disk/ streamed into the temporary
// file in place of the download.
//
// ImportReader runs the same steps on a stream (an upload body, CDI's
// cdi-uploadserver): the stream is spooled to the temporary file first,
// since qemu-img needs a seekable file, and read once (no retries).
//
// Errors are *Error values carrying a Reason (NotFound, ChecksumMismatch,
// NotAnImage, TooBig, Unreachable, Timeout, ...) and whether retrying can
// help, for the DataVolume controller's conditions.
//
// qemu-img (Debian package qemu-utils) must be on PATH or named in
// Options.QemuImg.
package importer

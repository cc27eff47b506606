// Module guest builds the end-to-end test guest (a Debian cloud kernel and
// a busybox initramfs) from Debian packages into bin/guest. It is kept out
// of the main module so the main go.mod does not carry its cpio writer.
module github.com/converge-dev/converge/hack/guest

go 1.26.8

require github.com/cavaliergopher/cpio v1.0.1

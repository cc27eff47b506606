package vmdisks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/converge-dev/converge/nodeplane/vm/domain"
)

// qemuImg runs the qemu-img binary bin with args; the error carries its
// output.
func qemuImg(ctx context.Context, bin string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", bin, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// imageInfo is what qemu-img info --output=json says of an image.
type imageInfo struct {
	Format          string `json:"format"`
	VirtualSize     int64  `json:"virtual-size"`
	BackingFilename string `json:"backing-filename"`
	FormatSpecific  struct {
		Data struct {
			DataFile string `json:"data-file"`
		} `json:"data"`
	} `json:"format-specific"`
}

// qemuInfo runs qemu-img (bin) info on path read as format (never
// probed).
func qemuInfo(ctx context.Context, bin, path, format string) (imageInfo, error) {
	out, err := qemuImg(ctx, bin, "info", "--output=json", "-f", format, path)
	if err != nil {
		return imageInfo{}, err
	}
	var info imageInfo
	if err := json.Unmarshal(out, &info); err != nil {
		return imageInfo{}, fmt.Errorf("qemu-img info %s: %w", path, err)
	}
	return info, nil
}

// prepareEmptyDisk creates a sparse qcow2 image of size bytes at path,
// as KubeVirt's emptyDisk; an image made by an earlier call stays (it
// holds what the guest wrote).
func (d *Disks) prepareEmptyDisk(ctx context.Context, size int64, path string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	return replaceFile(path, func(tmp string) error {
		_, err := qemuImg(ctx, d.opts.QemuImg, "create", "-q", "-f", domain.FormatQCOW2, tmp, strconv.FormatInt(size, 10))
		return err
	})
}

// createOverlay creates a qcow2 image at path whose backing file is
// backing, read as backingFormat: the guest's writes go to path, backing
// is only read.
func (d *Disks) createOverlay(ctx context.Context, backing, backingFormat, path string) error {
	return replaceFile(path, func(tmp string) error {
		_, err := qemuImg(ctx, d.opts.QemuImg, "create", "-q", "-f", domain.FormatQCOW2, "-b", backing, "-F", backingFormat, tmp)
		return err
	})
}

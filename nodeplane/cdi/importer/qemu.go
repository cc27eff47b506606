package importer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// imageInfo is the part of `qemu-img info --output=json` we use.
type imageInfo struct {
	Format          string `json:"format"`
	VirtualSize     int64  `json:"virtual-size"`
	BackingFilename string `json:"backing-filename"`
	FormatSpecific  struct {
		Type string                     `json:"type"`
		Data map[string]json.RawMessage `json:"data"`
	} `json:"format-specific"`
}

// qemuInfo runs `qemu-img info --output=json path` (CDI pkg/image/qemu.go
// Info). A failure means qemu-img cannot read the file as any format.
func qemuInfo(ctx context.Context, bin, path string) (imageInfo, error) {
	var out, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "info", "--output=json", path)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return imageInfo{}, fmt.Errorf("%s info %s: %w: %s", bin, path, err, strings.TrimSpace(stderr.String()))
	}
	var info imageInfo
	if err := json.Unmarshal(out.Bytes(), &info); err != nil {
		return imageInfo{}, fmt.Errorf("%s info %s: output is not the expected JSON: %w", bin, path, err)
	}
	if info.Format == "" || info.VirtualSize <= 0 {
		return imageInfo{}, fmt.Errorf("%s info %s: expected a format and a positive virtual-size, got %q and %d", bin, path, info.Format, info.VirtualSize)
	}
	return info, nil
}

// progressRE matches qemu-img convert -p output, "    (45.00/100%)" (the
// expression CDI's qemu.go uses).
var progressRE = regexp.MustCompile(`\((\d+\.\d+)/100%\)`)

// qemuConvertRaw runs `qemu-img convert -t writeback -p -f FORMAT -O raw
// -S 4k src dst` (CDI pkg/image/qemu.go ConvertToRawStream, plus -S 4k for
// holes), calling onPercent with each parsed percentage.
//
// If dst exists (the empty temporary made for it; qemu-img keeps its
// inode), each progress line also starts the writeback of what qemu-img
// has written so far (see flusher), so its closing fdatasync finds most
// of the image on disk.
func qemuConvertRaw(ctx context.Context, bin, format, src, dst string, onPercent func(float64)) error {
	if out, err := os.Open(dst); err == nil {
		fl := newFlusher(out)
		defer out.Close()
		defer fl.stop()
		next := onPercent
		onPercent = func(p float64) {
			fl.poke()
			if next != nil {
				next(p)
			}
		}
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "convert", "-t", "writeback", "-p", "-f", format, "-O", "raw", "-S", "4k", src, dst)
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s convert %s: %w", bin, src, err)
	}
	parseProgress(stdout, onPercent)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("%s convert %s to raw %s: %w: %s", bin, src, dst, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// parseProgress reads qemu-img -p output (lines ended by \r or \n) until
// EOF and calls fn with every percentage found.
func parseProgress(r io.Reader, fn func(float64)) {
	sc := bufio.NewScanner(r)
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
			return i + 1, data[:i], nil
		}
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	})
	for sc.Scan() {
		if m := progressRE.FindSubmatch(sc.Bytes()); m != nil {
			if v, err := strconv.ParseFloat(string(m[1]), 64); err == nil && fn != nil {
				fn(v)
			}
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

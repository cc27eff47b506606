package hostpath

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"

	"github.com/converge-dev/converge/nodeplane/csi/loopdev"
)

// xfsDir mounts a new XFS filesystem with reflink (mkfs.xfs -m reflink=1)
// of size bytes, made in a sparse image under a temporary directory and
// attached to a loop device, and returns its mount point; cleanup unmounts
// and detaches it. It skips tb without root or mkfs.xfs (Debian xfsprogs).
func xfsDir(tb testing.TB, size int64) string {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("an XFS pool needs root (loop device, mount)")
	}
	mkfs, err := exec.LookPath("mkfs.xfs")
	if err != nil {
		tb.Skip("mkfs.xfs not installed (apt-get install xfsprogs): reflink not exercised")
	}
	base := tb.TempDir()
	img := filepath.Join(base, "xfs.img")
	f, err := os.Create(img)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		tb.Fatal(err)
	}
	if out, err := exec.Command(mkfs, "-q", "-m", "reflink=1", img).CombinedOutput(); err != nil {
		tb.Fatalf("mkfs.xfs: %v\n%s", err, out)
	}
	dev, err := loopdev.Attach(f, false)
	if err != nil {
		tb.Fatal(err)
	}
	mnt := filepath.Join(base, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := unix.Mount(dev, mnt, "xfs", 0, ""); err != nil {
		_ = loopdev.Detach(dev)
		tb.Skipf("mounting XFS: %v", err)
	}
	tb.Cleanup(func() {
		if err := unix.Unmount(mnt, 0); err != nil {
			tb.Errorf("unmount %s: %v", mnt, err)
		}
		if err := loopdev.Detach(dev); err != nil {
			tb.Error(err)
		}
	})
	return mnt
}

// TestReflinkPool runs snapshot and clone on a pool on XFS with reflink:
// copyFile shares extents (copyReflink), so a clone of a disk with 16 MiB
// of data allocates no new data blocks on the filesystem; the clone and a
// snapshot have the source's bytes, and writing to the source changes
// neither.
func TestReflinkPool(t *testing.T) {
	mnt := xfsDir(t, 1<<30)
	opts := testOptions(t.TempDir())
	opts.Pools[0].Path = filepath.Join(mnt, "pool")
	d := startDriver(t, opts)
	ctx := context.Background()
	c := d.controller()
	if _, err := c.CreateVolume(ctx, createReq("golden", 64<<20, blockCap())); err != nil {
		t.Fatal(err)
	}
	disk := filepath.Join(opts.Pools[0].Path, "golden", diskFile)
	data := bytes.Repeat([]byte("golden image "), 16<<20/13)
	writeSparse(t, disk, 64<<20, extent{8 << 20, data})
	want, err := os.ReadFile(disk)
	if err != nil {
		t.Fatal(err)
	}

	// The method, on the same filesystem.
	src, err := os.Open(disk)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(filepath.Join(mnt, "direct"))
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if m, err := copyFile(dst, src); err != nil || m != copyReflink {
		t.Fatalf("copyFile on XFS with reflink = %v, %v; want reflink", m, err)
	}

	var st0, st1 unix.Statfs_t
	if err := unix.Statfs(mnt, &st0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateVolume(ctx, fromVolume(createReq("clone", 64<<20, blockCap()), "golden")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSnapshot(ctx, snapReq("snap", "golden")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Statfs(mnt, &st1); err != nil {
		t.Fatal(err)
	}
	if used := (int64(st0.Bfree) - int64(st1.Bfree)) * st1.Bsize; used > int64(len(data))/2 {
		t.Errorf("clone and snapshot of a disk with %d MiB of data used %d MiB of the filesystem: not shared", len(data)>>20, used>>20)
	}
	if f, err := os.OpenFile(disk, os.O_WRONLY, 0); err != nil {
		t.Fatal(err)
	} else {
		_, err := f.WriteAt(bytes.Repeat([]byte{'X'}, 1<<20), 8<<20)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{filepath.Join(opts.Pools[0].Path, "clone", diskFile), filepath.Join(opts.Pools[0].Path, snapshotsDir, "snap", diskFile)} {
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the source as it was (written to the source since)", p)
		}
	}
	for _, id := range []string{"golden", "clone"} {
		if _, err := c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: "snap"}); err != nil {
		t.Fatal(err)
	}
}

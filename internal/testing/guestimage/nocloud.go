package guestimage

import (
	"fmt"
	"os"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/disk"
	"github.com/diskfs/go-diskfs/filesystem"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
)

// NoCloudLabel is the volume label of a NoCloud disk (cloud-init's
// NoCloud datasource; KubeVirt's pkg/cloud-init writes it with
// genisoimage -volid cidata -joliet -rock).
const NoCloudLabel = "cidata"

// NoCloudISO writes to path an ISO 9660 file system with Rock Ridge
// names, labelled NoCloudLabel, holding /user-data and /meta-data with
// the bodies given (meta-data as KubeVirt writes it: "instance-id: ID"
// and "local-hostname: NAME" lines).
func NoCloudISO(path, userData, metaData string) error {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	size := int64(len(userData)+len(metaData)) + 1<<20 // the ISO's structures need well under a MiB
	b, err := file.CreateFromPath(path, size)
	if err != nil {
		return fmt.Errorf("NoCloud ISO %s: %w", path, err)
	}
	d, err := diskfs.OpenBackend(b, diskfs.WithSectorSize(2048))
	if err != nil {
		return fmt.Errorf("NoCloud ISO %s: %w", path, err)
	}
	defer d.Close()
	fs, err := d.CreateFilesystem(disk.FilesystemSpec{Partition: 0, FSType: filesystem.TypeISO9660, VolumeLabel: NoCloudLabel})
	if err != nil {
		return fmt.Errorf("NoCloud ISO %s: %w", path, err)
	}
	for _, f := range []struct{ name, body string }{{"/user-data", userData}, {"/meta-data", metaData}} {
		w, err := fs.OpenFile(f.name, os.O_CREATE|os.O_RDWR)
		if err != nil {
			return fmt.Errorf("NoCloud ISO %s: %s: %w", path, f.name, err)
		}
		if _, err := w.Write([]byte(f.body)); err != nil {
			return fmt.Errorf("NoCloud ISO %s: %s: %w", path, f.name, err)
		}
		if err := w.Close(); err != nil {
			return err
		}
	}
	iso, ok := fs.(*iso9660.FileSystem)
	if !ok {
		return fmt.Errorf("NoCloud ISO %s: go-diskfs made a %T, want an ISO 9660 file system", path, fs)
	}
	if err := iso.Finalize(iso9660.FinalizeOptions{RockRidge: true, VolumeIdentifier: NoCloudLabel}); err != nil {
		return fmt.Errorf("NoCloud ISO %s: %w", path, err)
	}
	return nil
}

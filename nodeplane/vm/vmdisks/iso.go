package vmdisks

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
)

// isoBlockSize is the logical block size of the ISO 9660 volumes made
// here (the standard's and every CD-ROM's).
const isoBlockSize = 2048

// WriteISO writes an ISO 9660 image at dst (replacing it whole, through a
// temporary file beside it) labelled label ("" gives ISOIMAGE) holding
// files, keyed by their slash-separated path in the image, with Rock
// Ridge and Joliet names (KubeVirt's xorrisofs -joliet -rock), made with
// github.com/diskfs/go-diskfs. The image is padded to whole blocks.
func WriteISO(dst, label string, files map[string][]byte) error {
	err := replaceFile(dst, func(tmp string) error {
		work, err := os.MkdirTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".work-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(work)
		f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		fs, err := iso9660.Create(file.New(f, false), 0, 0, isoBlockSize, work)
		if err != nil {
			return err
		}
		names := make([]string, 0, len(files))
		for name := range files {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			p := path.Clean("/" + name)
			if p == "/" || p != "/"+name {
				return fmt.Errorf("file %q: expected a clean relative path", name)
			}
			if dir := path.Dir(p); dir != "/" {
				if err := fs.Mkdir(dir); err != nil {
					return fmt.Errorf("directory %s: %w", dir, err)
				}
			}
			w, err := fs.OpenFile(p, os.O_CREATE|os.O_RDWR)
			if err != nil {
				return fmt.Errorf("file %s: %w", p, err)
			}
			_, err = w.Write(files[name])
			if cerr := w.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("file %s: %w", p, err)
			}
		}
		if err := fs.Finalize(iso9660.FinalizeOptions{RockRidge: true, Joliet: true, VolumeIdentifier: label}); err != nil {
			return err
		}
		// The last file's data may end inside a block: pad, so that the
		// image holds every block its volume descriptor counts.
		st, err := f.Stat()
		if err != nil {
			return err
		}
		if rem := st.Size() % isoBlockSize; rem != 0 {
			if err := f.Truncate(st.Size() + isoBlockSize - rem); err != nil {
				return err
			}
		}
		if err := f.Sync(); err != nil {
			return err
		}
		return f.Close()
	})
	if err != nil {
		return fmt.Errorf("ISO %s (label %s, files %s): %w", dst, label, strings.Join(sortedKeys(files), ", "), err)
	}
	return nil
}

func sortedKeys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

package importer

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// archive is an oci-archive source unpacked into a temporary OCI layout.
type archive struct {
	dir   string
	image v1.Image
}

func (a *archive) Close() error { return os.RemoveAll(a.dir) }

// openArchive reads the OCI archive (a tar of an OCI image layout, CDI's
// oci-archive transport, containers/image oci/archive) at p inside
// src.ArchiveDir, unpacks it into a temporary directory in tmpDir (the
// target volume's directory, so no other disk fills) and gives the image
// of src's platform its index names, the first image when none says its
// platform. p is opened through os.Root: a path or link leaving
// ArchiveDir is refused.
func openArchive(src RegistrySource, p, tmpDir string) (*archive, *Error) {
	if src.ArchiveDir == "" {
		return nil, newError(src.URL, ReasonInvalidInput, false, "oci-archive sources are not enabled on this node; expected converge-node cdi-importer --oci-archive-dir")
	}
	root, err := os.OpenRoot(src.ArchiveDir)
	if err != nil {
		return nil, newError(src.URL, ReasonWriteFailed, true, "OCI archive directory: %w", err)
	}
	defer root.Close()
	f, err := root.Open(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, newError(src.URL, ReasonNotFound, false, "no file %s in the node's OCI archive directory %s", p, src.ArchiveDir)
		}
		return nil, newError(src.URL, ReasonInvalidInput, false, "%s in the node's OCI archive directory: %w", p, err)
	}
	defer f.Close()
	dir, err := os.MkdirTemp(tmpDir, ".oci-archive-*")
	if err != nil {
		return nil, newError(src.URL, ReasonWriteFailed, true, "temporary directory in %s: %w", tmpDir, err)
	}
	a := &archive{dir: dir}
	if err := untar(f, dir); err != nil {
		a.Close()
		return nil, newError(src.URL, ReasonNotAnImage, false, "%s: expected a tar of an OCI image layout: %w", p, err)
	}
	img, err := layoutImage(dir, platform(src))
	if err != nil {
		a.Close()
		return nil, newError(src.URL, ReasonNotAnImage, false, "%s: %w", p, err)
	}
	a.image = img
	return a, nil
}

// untar writes the directories and regular files of r into dir (through
// os.Root, so no entry lands outside it); other entry types are skipped.
func untar(r io.Reader, dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(path.Clean("/"+hdr.Name), "/")
		if name == "" {
			continue
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			if d := path.Dir(name); d != "." {
				if err := root.MkdirAll(d, 0o700); err != nil {
					return err
				}
			}
			out, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
}

// layoutImage gives the image of plat in the OCI layout at dir: the
// first manifest of its index (or of a nested index) whose platform is
// plat or unset.
func layoutImage(dir string, plat v1.Platform) (v1.Image, error) {
	ii, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("not an OCI image layout: %w", err)
	}
	return pickImage(ii, plat)
}

func pickImage(ii v1.ImageIndex, plat v1.Platform) (v1.Image, error) {
	m, err := ii.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && !d.Platform.Satisfies(plat) {
			continue
		}
		switch {
		case d.MediaType.IsImage():
			return ii.Image(d.Digest)
		case d.MediaType.IsIndex():
			child, err := ii.ImageIndex(d.Digest)
			if err != nil {
				return nil, err
			}
			if img, err := pickImage(child, plat); err == nil {
				return img, nil
			}
		}
	}
	return nil, fmt.Errorf("no image for %s in the archive's index", plat.String())
}

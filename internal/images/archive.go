package images

import (
	"fmt"
	"io"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// WriteArchive writes img tagged reference to file as a docker-archive
// tarball (`docker save`'s format, go-containerregistry's tarball.Write:
// the config, one .tar.gz per layer and a manifest.json with RepoTags),
// which `ctr images import` tags with reference and `docker load` takes
// too. The entries have fixed headers (mode 0644, no times), so the
// archive is a function of the image. It is written beside file and
// renamed into place.
func WriteArchive(file, reference string, img v1.Image) error {
	tag, err := name.NewTag(reference, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", reference, err)
	}
	return writeAtomic(file, func(w io.Writer) error {
		return tarball.Write(tag, img, w)
	})
}

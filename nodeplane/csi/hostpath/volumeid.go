package hostpath

import (
	"fmt"
	"strings"
)

// MaxVolumeIDLength is the longest volume ID (and CreateVolume name) in
// bytes: 128, the CSI spec's size limit for identifiers.
const MaxVolumeIDLength = 128

// metaFile, dataDir and diskFile are the entries of a volume directory.
const (
	metaFile = "volume.json"
	dataDir  = "data"
	diskFile = "disk.img"
)

// ValidateVolumeID reports whether id can name a volume directory: 1 to
// MaxVolumeIDLength bytes of ASCII letters, digits, '-', '_' and '.',
// starting with a letter or digit (so never "", ".", ".." or a hidden
// file), with no '/', NUL or other byte that could make it a path. A
// CreateVolume name becomes the volume ID unchanged, so names follow the
// same rule. The error quotes the ID and says what is allowed.
func ValidateVolumeID(id string) error { return validateID("volume ID", id) }

// validateID applies the rule of ValidateVolumeID to an ID of some kind
// ("volume ID", "snapshot ID"); the error starts with kind.
func validateID(kind, id string) error {
	if id == "" {
		return fmt.Errorf("%s: required", kind)
	}
	if len(id) > MaxVolumeIDLength {
		return fmt.Errorf("%s %q…: %d bytes, at most %d allowed", kind, id[:32], len(id), MaxVolumeIDLength)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || (i > 0 && (c == '-' || c == '_' || c == '.'))
		if !ok {
			return fmt.Errorf("%s %q: byte %d (%q) not allowed: want letters, digits, '-', '_' or '.', starting with a letter or digit", kind, id, i, strings.ToValidUTF8(string(c), "?"))
		}
	}
	return nil
}

// ValidateSnapshotID reports whether id can name a snapshot directory
// <pool>/.snapshots/<id>, by the same rule as ValidateVolumeID (a
// CreateSnapshot name becomes the snapshot ID unchanged). The error quotes
// the ID and says what is allowed.
func ValidateSnapshotID(id string) error { return validateID("snapshot ID", id) }

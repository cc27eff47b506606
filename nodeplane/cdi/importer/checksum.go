package importer

import (
	"crypto/md5"  //nolint:gosec // user-selected checksum algorithm, as CDI accepts
	"crypto/sha1" //nolint:gosec // user-selected checksum algorithm, as CDI accepts
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"
)

// checksum is a parsed "algorithm:hex" string (CDI pkg/util/checksum format).
type checksum struct {
	algo string
	want string
	h    hash.Hash
}

// parseChecksum parses "sha256:<hex>" (or sha512, sha1, md5); "" gives nil.
func parseChecksum(s string) (*checksum, error) {
	if s == "" {
		return nil, nil
	}
	algo, hexsum, ok := strings.Cut(s, ":")
	if !ok {
		return nil, fmt.Errorf("checksum %q: expected \"algorithm:hex\", e.g. sha256:<64 hex digits>", s)
	}
	algo = strings.ToLower(algo)
	var h hash.Hash
	switch algo {
	case "sha256":
		h = sha256.New()
	case "sha512":
		h = sha512.New()
	case "sha1":
		h = sha1.New() //nolint:gosec
	case "md5":
		h = md5.New() //nolint:gosec
	default:
		return nil, fmt.Errorf("checksum %q: unsupported algorithm %q, expected sha256, sha512, sha1 or md5", s, algo)
	}
	hexsum = strings.ToLower(hexsum)
	if b, err := hex.DecodeString(hexsum); err != nil || len(b) != h.Size() {
		return nil, fmt.Errorf("checksum %q: expected %d hex digits for %s", s, 2*h.Size(), algo)
	}
	return &checksum{algo: algo, want: hexsum, h: h}, nil
}

// verify compares the hash of what was written to h with the expected one.
func (c *checksum) verify() error {
	got := hex.EncodeToString(c.h.Sum(nil))
	if got != c.want {
		return fmt.Errorf("checksum mismatch: expected %s:%s, downloaded bytes hash to %s:%s", c.algo, c.want, c.algo, got)
	}
	return nil
}

func (c *checksum) String() string { return c.algo + ":" + c.want }

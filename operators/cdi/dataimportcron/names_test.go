package dataimportcron

import (
	"strings"
	"testing"
)

// TestDataVolumeName: CDI's names, <dataSource>-<12 hex digits>, and the
// shortening of openshift/library-go's naming.GetName past 253 characters.
func TestDataVolumeName(t *testing.T) {
	long := strings.Repeat("a", 250)
	for _, tc := range []struct {
		name, source, digest, want, err string
	}{
		{"CDI's example", "fedora", "sha256:0123456789abcdef0123", "fedora-0123456789ab", ""},
		{"exactly 12 digits", "f", "sha256:0123456789ab", "f-0123456789ab", ""},
		{"too short", "f", "sha256:0123", "", "too short"},
		{"no prefix", "f", "md5:0123456789abcdef", "", "no supported prefix"},
		{"long base hashed", long, "sha256:0123456789abcdef", long[:253-10-12] + "-" + hash(long) + "-0123456789ab", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DataVolumeName(tc.source, tc.digest)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("%q, %v; want %q", got, err, tc.want)
			}
			if len(got) > 253 {
				t.Errorf("%d characters", len(got))
			}
		})
	}
}

// TestHash is FNV-1a 32 as 8 hex digits (library-go's hash).
func TestHash(t *testing.T) {
	for in, want := range map[string]string{"": "811c9dc5", "a": "e40c292c"} {
		if got := hash(in); got != want {
			t.Errorf("hash(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestPinDigest: the tag and a former digest are dropped, a registry's
// port kept (CDI's untagDigestedDockerURL).
func TestPinDigest(t *testing.T) {
	const d = "sha256:abc"
	for _, tc := range []struct{ url, want string }{
		{"docker://quay.io/containerdisks/fedora:40", "docker://quay.io/containerdisks/fedora@" + d},
		{"docker://127.0.0.1:5000/disks/fedora:latest", "docker://127.0.0.1:5000/disks/fedora@" + d},
		{"docker://127.0.0.1:5000/disks/fedora", "docker://127.0.0.1:5000/disks/fedora@" + d},
		{"docker://fedora:40", "docker://fedora@" + d},
		{"docker://quay.io/a/b:1@sha256:old", "docker://quay.io/a/b@" + d},
		{"docker://quay.io/a/b@sha256:old", "docker://quay.io/a/b@" + d},
	} {
		if got := PinDigest(tc.url, d); got != tc.want {
			t.Errorf("PinDigest(%q) = %q, want %q", tc.url, got, tc.want)
		}
	}
}

package datavolume

import (
	"fmt"
	"math"
	"regexp"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// DefaultFilesystemOverhead is CDI's global filesystem overhead when the
// CDI CR sets none (containerized-data-importer pkg/common
// DefaultGlobalOverhead).
const DefaultFilesystemOverhead = "0.055"

// alignSize is what the requested size is aligned to before the overhead
// is added (CDI pkg/util DefaultAlignBlockSize, 1 MiB).
const alignSize = 1 << 20

// percent is CDI's Percent (api core/v1beta1: "^(0(?:\.\d{1,3})?|1)$").
var percent = regexp.MustCompile(`^(0(\.[0-9]{1,3})?|1)$`)

// Overhead gives the filesystem overhead of a Filesystem volume of
// StorageClass class ("" when the claim names none and the cluster has no
// default) under cdi, the CDI CR the controller follows (nil: none), as
// CDI's GetFilesystemOverheadForStorageClass reads its CDIConfig status:
// no CDI gives 0 (CDI without a CDIConfig); else
// spec.config.filesystemOverhead.storageClass[class] when set, else its
// global, else DefaultFilesystemOverhead. A value that is not a CDI
// Percent below 1 is an error naming the CDI and the field (CDI's config
// controller would fall back or fail its reconcile; the CDI operator
// refuses the CR too).
func Overhead(cdi *unstructured.Unstructured, class string) (float64, error) {
	if cdi == nil {
		return 0, nil
	}
	field := "global"
	v, found, err := unstructured.NestedString(cdi.Object, "spec", "config", "filesystemOverhead", "global")
	if err != nil {
		return 0, fmt.Errorf("CDI %s: spec.config.filesystemOverhead.global: %w", cdi.GetName(), err)
	}
	if !found || v == "" {
		v = DefaultFilesystemOverhead
	}
	if class != "" {
		per, found, err := unstructured.NestedStringMap(cdi.Object, "spec", "config", "filesystemOverhead", "storageClass")
		if err != nil {
			return 0, fmt.Errorf("CDI %s: spec.config.filesystemOverhead.storageClass: %w", cdi.GetName(), err)
		}
		if s, ok := per[class]; found && ok {
			v, field = s, fmt.Sprintf("storageClass[%q]", class)
		}
	}
	f, err := strconv.ParseFloat(v, 64)
	if !percent.MatchString(v) || err != nil || f >= 1 {
		return 0, fmt.Errorf("CDI %s: spec.config.filesystemOverhead.%s %q: expected a fraction of the volume in [0, 1) with at most 3 decimals (\"0.055\")", cdi.GetName(), field, v)
	}
	return f, nil
}

// RequiredSpace gives the size a Filesystem claim asks for so that
// requested bytes remain once overhead (in [0, 1)) is taken, as CDI's
// GetRequiredSpace: requested aligned up to 1 MiB, divided by
// 1 - overhead, rounded up.
func RequiredSpace(overhead float64, requested int64) int64 {
	aligned := (requested + alignSize - 1) / alignSize * alignSize
	return int64(math.Ceil(float64(aligned) / (1 - overhead)))
}

package dataimportcron

import (
	"fmt"
	"hash/fnv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Labels and annotations, CDI's names (pkg/common/common.go,
// pkg/controller/common/util.go, dataimportcron-controller.go).
const (
	// LabelCron names the DataImportCron a DataVolume, PVC or DataSource
	// belongs to.
	LabelCron = "cdi.kubevirt.io/dataImportCron"
	// LabelCleanup marks what is deleted with its cron (retentionPolicy
	// None).
	LabelCleanup = LabelCron + ".cleanup"
	// AnnDesiredDigest is the digest the cron should import.
	AnnDesiredDigest = "cdi.kubevirt.io/storage.import.sourceDesiredDigest"
	// AnnNextCronTime is the next poll (RFC 3339).
	AnnNextCronTime = "cdi.kubevirt.io/storage.import.nextCronTime"
	// AnnLastCronTime is the last poll (RFC 3339).
	AnnLastCronTime = "cdi.kubevirt.io/storage.import.lastCronTime"
	// AnnLastUseTime is when an import was last current (RFC 3339 with
	// nanoseconds, UTC), the garbage collection's order.
	AnnLastUseTime = "cdi.kubevirt.io/storage.import.lastUseTime"
	// AnnImmediateBinding asks for the PVC to be bound at once.
	AnnImmediateBinding = "cdi.kubevirt.io/storage.bind.immediate.requested"
	// AnnPodRetainAfterCompletion is passed from the cron to its
	// DataVolumes.
	AnnPodRetainAfterCompletion = "cdi.kubevirt.io/storage.pod.retainAfterCompletion"

	labelManagedBy = "app.kubernetes.io/managed-by"
	labelComponent = "app.kubernetes.io/component"
	// controllerName is CDI's common.CDIControllerName, the managed-by
	// value of what its controllers create.
	controllerName = "cdi-controller"
)

// passedLabels are the cron labels CDI copies to its DataVolumes and
// DataSource (cc.DefaultInstanceTypeLabels, LabelDynamicCredentialSupport).
var passedLabels = []string{
	"instancetype.kubevirt.io/default-instancetype",
	"instancetype.kubevirt.io/default-instancetype-kind",
	"instancetype.kubevirt.io/default-preference",
	"instancetype.kubevirt.io/default-preference-kind",
	"kubevirt.io/dynamic-credentials-support",
}

const (
	digestPrefix       = "sha256:"
	digestSuffixLength = 12
	// DefaultImportsToKeep is how many imports garbage collection keeps
	// when spec.importsToKeep is unset (CDI's defaultImportsToKeepPerCron).
	DefaultImportsToKeep = 3
)

// DataVolumeName gives the name of the import of digest for a cron
// managing the DataSource dataSource, as CDI's createDvName:
// <dataSource>-<the 12 hex digits after "sha256:">, shortened as
// resourceName. It fails on a digest without the sha256: prefix or with
// fewer than 12 digits.
func DataVolumeName(dataSource, digest string) (string, error) {
	hex, ok := strings.CutPrefix(digest, digestPrefix)
	if !ok {
		return "", fmt.Errorf("digest %q has no supported prefix; expected %s", digest, digestPrefix)
	}
	if len(hex) < digestSuffixLength {
		return "", fmt.Errorf("digest %q is too short", digest)
	}
	return resourceName(dataSource, hex[:digestSuffixLength]), nil
}

// resourceName joins base and suffix with a dash; past 253 characters
// (a DNS subdomain) it truncates base and inserts the FNV-1a hash of
// base, as openshift/library-go pkg/build/naming.GetName, which CDI's
// naming.GetResourceName calls.
func resourceName(base, suffix string) string {
	const maxLength = validation.DNS1123SubdomainMaxLength
	name := base + "-" + suffix
	if len(name) <= maxLength {
		return name
	}
	baseLength := maxLength - 10 - len(suffix)
	if baseLength < 0 {
		prefix := base[:min(len(base), max(0, maxLength-9))]
		short := prefix + "-" + hash(name)
		return short[:min(maxLength, len(short))]
	}
	return base[:baseLength] + "-" + hash(base) + "-" + suffix
}

func hash(s string) string {
	h := fnv.New32a()
	h.Write([]byte(s))
	return fmt.Sprintf("%08x", h.Sum32())
}

// PinDigest gives a registry URL (docker://host/repo[:tag][@digest])
// pinned to digest, its tag and any former digest dropped, as CDI's
// untagDigestedDockerURL: docker://host/repo@sha256:….
func PinDigest(url, digest string) string {
	rest, _, _ := strings.Cut(url, "@")
	if i := strings.LastIndex(rest, ":"); i > strings.LastIndex(rest, "/") && i > strings.Index(rest, "://") {
		rest = rest[:i]
	}
	return rest + "@" + digest
}

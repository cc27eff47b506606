package source

import (
	"fmt"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/go-git/go-git/v5/plumbing"
)

// highestTag returns the tag among refs whose name is the highest version
// in the semver range (already validated), as Flux's GitRepository
// spec.ref.semver does: tag names are parsed with semver.NewVersion (a
// leading "v" and missing minor/patch parts are allowed), tags that do not
// parse are ignored. Of two tags with equal versions ("v1.0.0" and
// "1.0.0") the one that sorts last by name wins. It returns an error
// wrapping ErrRefNotFound when no tag is in the range.
func highestTag(refs map[plumbing.ReferenceName]*plumbing.Reference, rng string) (plumbing.ReferenceName, error) {
	constraint, err := semver.NewConstraint(rng)
	if err != nil {
		return "", fmt.Errorf("%w: semver range %q: %w", ErrInvalidRef, rng, err)
	}
	var (
		best     *semver.Version
		bestName plumbing.ReferenceName
		versions []string
	)
	for name := range refs {
		if !name.IsTag() {
			continue
		}
		v, err := semver.NewVersion(name.Short())
		if err != nil {
			continue
		}
		versions = append(versions, name.Short())
		if !constraint.Check(v) {
			continue
		}
		if best == nil || v.GreaterThan(best) || v.Equal(best) && name > bestName {
			best, bestName = v, name
		}
	}
	if best == nil {
		slices.Sort(versions)
		seen := "the remote has no version tags"
		if len(versions) > 0 {
			if len(versions) > 20 {
				versions = append(versions[:20], "…")
			}
			seen = "version tags: " + strings.Join(versions, ", ")
		}
		return "", fmt.Errorf("%w: no tag matches semver range %q (%s)", ErrRefNotFound, rng, seen)
	}
	return bestName, nil
}

package vmdisks

import (
	"context"
	"errors"
	"fmt"
)

// defaultObjectLabel is the volume label of a secret or configMap disk
// that sets no volumeLabel, as KubeVirt's pkg/config.
const defaultObjectLabel = "cfgdata"

// prepareObjectISO writes the ISO of a secret or configMap volume at path:
// one file per key of the object (what, namespace/name, read through
// get), labelled label or cfgdata, as KubeVirt's pkg/config makes them
// from the volume the kubelet mounts. A missing object gives an empty ISO
// when optional is true (as the kubelet mounts an empty directory).
func (d *Disks) prepareObjectISO(ctx context.Context, what string, get ObjectGetter, namespace, name string, optional *bool, label, path string) error {
	data, err := get(ctx, namespace, name)
	if errors.Is(err, ErrNotFound) && optional != nil && *optional {
		data, err = nil, nil
	}
	if err != nil {
		return fmt.Errorf("%s %s/%s: %w", what, namespace, name, err)
	}
	if label == "" {
		label = defaultObjectLabel
	}
	return WriteISO(path, label, data)
}

// Package snapshotcrds holds the snapshot.storage.k8s.io v1 CRDs
// (VolumeSnapshot, VolumeSnapshotContent, VolumeSnapshotClass) pinned
// from external-snapshotter client/v8.4.0 (see SOURCE), the API of the
// client/v8 types converge uses for snapshots.
package snapshotcrds

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed snapshot.storage.k8s.io_*.yaml
var files embed.FS

// CRDs gives the three snapshot.storage.k8s.io CRDs decoded from the
// pinned YAML, sorted by file name (classes, contents, snapshots); an
// error names the file that does not decode.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(files, "*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, n := range names {
		b, err := files.ReadFile(n)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(b, crd); err != nil {
			return nil, fmt.Errorf("snapshotcrds: %s: %w", n, err)
		}
		out = append(out, crd)
	}
	return out, nil
}

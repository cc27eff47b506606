package instancetype

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	converge "github.com/converge-dev/converge"
)

// BundleDir is where the repository pins the common-instancetypes bundles
// KubeVirt's virt-operator deploys (its SOURCE names the release); the
// virt component derives them from the CUE generated from these files
// (components/virt/commoninstancetypes_gen.cue).
const BundleDir = "components/virt/data/common-instancetypes"

// The bundle files in BundleDir, as KubeVirt names them
// (pkg/virt-operator/resource/generate/components/data/common-instancetypes).
const (
	ClusterInstancetypesBundle = "common-clusterinstancetypes-bundle.yaml"
	ClusterPreferencesBundle   = "common-clusterpreferences-bundle.yaml"
)

// CommonBundle gives the objects of one pinned bundle file (file: one of
// ClusterInstancetypesBundle, ClusterPreferencesBundle) as the release has
// them, in file order, read from the CUE module converge embeds (as
// KubeVirt's NewClusterInstancetypes/NewClusterPreferences decode theirs,
// kubevirt pkg/virt-operator/resource/generate/components/instancetypes.go).
func CommonBundle(file string) ([]*unstructured.Unstructured, error) {
	p := path.Join(BundleDir, file)
	data, err := converge.CUE.ReadFile(p)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", p, len(out)+1, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

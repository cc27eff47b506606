package macpool

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NetworkAddonsConfigGVK is the cnao operand converge renders from the
// HyperConverged (components/cnao), cluster-scoped and named
// NetworkAddonsConfigName.
var NetworkAddonsConfigGVK = schema.GroupVersionKind{Group: "networkaddonsoperator.network.kubevirt.io", Version: "v1", Kind: "NetworkAddonsConfig"}

// NetworkAddonsConfigCRD is the name of the NetworkAddonsConfig CRD.
const NetworkAddonsConfigCRD = "networkaddonsconfigs.networkaddonsoperator.network.kubevirt.io"

// NetworkAddonsConfigName is the one NetworkAddonsConfig CNAO reads.
const NetworkAddonsConfigName = "cluster"

// NetworkAddonsConfigRange takes a reader (an API reader) and gives a
// RangeSource reading spec.kubeMacPool.rangeStart/rangeEnd of the
// NetworkAddonsConfig "cluster", as CNAO passes them to kubemacpool
// (cluster-network-addons-operator pkg/network/kubemacpool.go). It gives
// the zero Range — keep the recorded or a random one, as CNAO does for
// an empty kubeMacPool — when the NetworkAddonsConfig, its CRD or both
// fields are absent, and an error naming the object and fields when only
// one is set or either does not parse.
func NetworkAddonsConfigRange(r client.Reader) func(context.Context) (Range, error) {
	return func(ctx context.Context) (Range, error) {
		nac := &unstructured.Unstructured{}
		nac.SetGroupVersionKind(NetworkAddonsConfigGVK)
		err := r.Get(ctx, types.NamespacedName{Name: NetworkAddonsConfigName}, nac)
		switch {
		case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
			return Range{}, nil
		case err != nil:
			return Range{}, fmt.Errorf("NetworkAddonsConfig %s: reading the MAC range: %w", NetworkAddonsConfigName, err)
		}
		start, _, _ := unstructured.NestedString(nac.Object, "spec", "kubeMacPool", "rangeStart")
		end, _, _ := unstructured.NestedString(nac.Object, "spec", "kubeMacPool", "rangeEnd")
		if start == "" && end == "" {
			return Range{}, nil
		}
		if start == "" || end == "" {
			return Range{}, fmt.Errorf("NetworkAddonsConfig %s: spec.kubeMacPool: rangeStart %q and rangeEnd %q: want both or neither", NetworkAddonsConfigName, start, end)
		}
		rg, err := ParseRange(start, end)
		if err != nil {
			return Range{}, fmt.Errorf("NetworkAddonsConfig %s: spec.kubeMacPool: %w", NetworkAddonsConfigName, err)
		}
		return rg, nil
	}
}

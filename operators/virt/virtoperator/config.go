package virtoperator

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/operators/operand"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/scheduler"
)

// Config is what converge-controller's virt roles honour of the KubeVirt
// CR's spec.configuration.
type Config struct {
	// Ratios are developerConfiguration.cpuAllocationRatio and
	// memoryOvercommit, KubeVirt's defaults (10, 100) when unset.
	Ratios scheduler.Ratios
	// ObsoleteCPUModels are the CPU models obsoleteCPUModels sets true.
	ObsoleteCPUModels map[string]bool
}

// DefaultConfig is KubeVirt's defaults: scheduler.DefaultRatios and no
// obsolete model.
func DefaultConfig() Config { return Config{Ratios: scheduler.DefaultRatios()} }

// ConfigOf reads cr's Config (kubevirt.io/api core/v1 KubeVirtSpec). A CR
// that does not decode as a KubeVirt gives DefaultConfig and the error
// (its derivation reports it on the CR as well).
func ConfigOf(cr *unstructured.Unstructured) (Config, error) {
	c := DefaultConfig()
	kv := &kubevirtv1.KubeVirt{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(cr.Object, kv); err != nil {
		return c, err
	}
	conf := kv.Spec.Configuration
	if d := conf.DeveloperConfiguration; d != nil {
		if d.CPUAllocationRatio > 0 {
			c.Ratios.CPUAllocationRatio = d.CPUAllocationRatio
		}
		if d.MemoryOvercommit > 0 {
			c.Ratios.MemoryOvercommit = d.MemoryOvercommit
		}
	}
	for model, obsolete := range conf.ObsoleteCPUModels {
		if obsolete {
			if c.ObsoleteCPUModels == nil {
				c.ObsoleteCPUModels = map[string]bool{}
			}
			c.ObsoleteCPUModels[model] = true
		}
	}
	return c, nil
}

// Configs reads the Config of the deployed native KubeVirt CR — the
// oldest native one, as the operator deploys only that one — through a
// reader (the manager's cache), at each call.
type Configs struct {
	Reader client.Reader
	Log    logr.Logger
}

// Get gives the deployed native KubeVirt's Config, or DefaultConfig when
// there is none or it cannot be read (logged).
func (c Configs) Get(ctx context.Context) Config {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(GVK.GroupVersion().WithKind(GVK.Kind + "List"))
	if err := c.Reader.List(ctx, list); err != nil {
		c.Log.Error(err, "reading the KubeVirt configuration; using KubeVirt's defaults")
		return DefaultConfig()
	}
	var first *unstructured.Unstructured
	for i := range list.Items {
		o := &list.Items[i]
		if o.GetAnnotations()[operand.NativeAnnotation] != operand.Native || o.GetDeletionTimestamp() != nil {
			continue
		}
		if first == nil || older(o, first) {
			first = o
		}
	}
	if first == nil {
		return DefaultConfig()
	}
	cfg, err := ConfigOf(first)
	if err != nil {
		c.Log.Error(err, "decoding the KubeVirt configuration; using KubeVirt's defaults", "kubevirt", first.GetNamespace()+"/"+first.GetName())
	}
	return cfg
}

// older orders CRs as the operator picks the deployed one: by creation,
// then namespace and name.
func older(a, b *unstructured.Unstructured) bool {
	ta, tb := a.GetCreationTimestamp(), b.GetCreationTimestamp()
	if !ta.Equal(&tb) {
		return ta.Before(&tb)
	}
	return a.GetNamespace()+"/"+a.GetName() < b.GetNamespace()+"/"+b.GetName()
}

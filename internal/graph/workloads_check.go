package graph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubevirtv1 "kubevirt.io/api/core/v1"
	instancetypev1beta1 "kubevirt.io/api/instancetype/v1beta1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	sigsjson "sigs.k8s.io/json"

	dvapi "github.com/converge-dev/converge/api/datavolume"
	"github.com/converge-dev/converge/operators/cdi/datavolume"
	"github.com/converge-dev/converge/operators/virt/virtcontroller/scheduler"
	"github.com/converge-dev/converge/operators/virt/vmadmission"
)

// problem is one field of a workload the checks refuse: Path from the
// object's root in the admission checks' notation (fieldSelectors), ""
// for the object as a whole, and why.
type problem struct {
	Path   string
	Reason string
	// Approx: Path is only a field the reason mentions; the problem is
	// reported at the deepest part of it the object has.
	Approx bool
}

// networkAttachmentDefinition is k8s.cni.cncf.io/v1
// NetworkAttachmentDefinition as Multus defines it
// (k8snetworkplumbingwg/network-attachment-definition-client
// pkg/apis/k8s.cni.cncf.io/v1 types.go): a CNI configuration in
// spec.config.
type networkAttachmentDefinition struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Config string `json:"config,omitempty"`
	} `json:"spec,omitempty"`
}

// typedObject gives a new value of the Go type upstream defines for kind,
// which the checks decode the object into; nil for a kind without one.
func typedObject(kind string) any {
	switch kind {
	case "VirtualMachine":
		return &kubevirtv1.VirtualMachine{}
	case "VirtualMachineInstance":
		return &kubevirtv1.VirtualMachineInstance{}
	case "DataVolume":
		return &cdiv1.DataVolume{}
	case "NetworkAttachmentDefinition":
		return &networkAttachmentDefinition{}
	case "VirtualMachineInstancetype":
		return &instancetypev1beta1.VirtualMachineInstancetype{}
	case "VirtualMachineClusterInstancetype":
		return &instancetypev1beta1.VirtualMachineClusterInstancetype{}
	case "VirtualMachinePreference":
		return &instancetypev1beta1.VirtualMachinePreference{}
	case "VirtualMachineClusterPreference":
		return &instancetypev1beta1.VirtualMachineClusterPreference{}
	case "Namespace":
		return &corev1.Namespace{}
	case "Secret":
		return &corev1.Secret{}
	case "ConfigMap":
		return &corev1.ConfigMap{}
	}
	return nil
}

// checkWorkload runs on the object u (JSON raw) the checks the cluster
// runs when it is created: it decodes into the upstream Go type (a field
// of the wrong type, or one the type does not have, is refused: the API
// server would refuse or silently drop it), then by kind
//
//   - VirtualMachine, VirtualMachineInstance: the VM validation webhook's
//     check (vmadmission.CheckWith, with the KubeVirt CR's obsolete CPU
//     models); for a VirtualMachine also its instancetype and preference
//     matchers (vmadmission.CheckInstancetypes without lookups) and, for
//     each spec.dataVolumeTemplates entry, the checks of a DataVolume;
//   - DataVolume: the DataVolume controller's (operators/cdi/datavolume:
//     the source it imports from, api/datavolume.SourceKind, and the
//     claim it creates, ClaimSpec);
//   - NetworkAttachmentDefinition: spec.config as the VMI scheduler parses
//     it (scheduler.NADResource: libcni's rules) and as the node agent
//     reads it (not empty).
func checkWorkload(u *unstructured.Unstructured, raw []byte, obsolete map[string]bool) []problem {
	kind := u.GetKind()
	typed := typedObject(kind)
	if typed == nil {
		return []problem{{Reason: fmt.Sprintf("kind %s has no checks", kind)}}
	}
	probs := decodeStrict(raw, typed, u.GetAPIVersion())
	if len(probs) > 0 {
		return probs
	}
	switch obj := typed.(type) {
	case *kubevirtv1.VirtualMachine:
		probs = append(probs, checkVMI(kind, raw, obsolete)...)
		// The instancetype and preference matchers, as admission checks
		// them (no lookups: the instancetypes may come with this commit).
		for _, e := range vmadmission.CheckInstancetypes(context.Background(), nil, obj, nil) {
			probs = append(probs, problem{Path: e.Path, Reason: e.Reason})
		}
		// vmadmission checks dataVolumeTemplates too (KubeVirt's
		// ValidateDataVolumeTemplate and the sources converge imports):
		// a path it already refused is not refused twice.
		seen := map[string]bool{}
		for _, p := range probs {
			seen[p.Path] = true
		}
		for i, t := range obj.Spec.DataVolumeTemplates {
			dv := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Name: t.Name, Namespace: obj.Namespace}, Spec: t.Spec}
			for _, p := range checkDataVolume(dv) {
				p.Path = fmt.Sprintf("spec.dataVolumeTemplates[%d].%s", i, p.Path)
				if !refusedAlready(seen, p.Path) {
					probs = append(probs, p)
				}
			}
		}
	case *kubevirtv1.VirtualMachineInstance:
		probs = append(probs, checkVMI(kind, raw, obsolete)...)
	case *cdiv1.DataVolume:
		probs = append(probs, checkDataVolume(obj)...)
	case *networkAttachmentDefinition:
		probs = append(probs, checkNAD(u)...)
	}
	return probs
}

// decodeStrict decodes raw into typed (of apiVersion) and gives a problem
// per field of the wrong type (only the first: decoding stops there) or
// unknown to the type, worded as vmadmission.UnknownFieldReason.
func decodeStrict(raw []byte, typed any, apiVersion string) []problem {
	if err := json.Unmarshal(raw, typed); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return []problem{{Path: te.Field, Reason: fmt.Sprintf("a %s where the API has a %s", te.Value, te.Type)}}
		}
		return []problem{{Reason: err.Error()}}
	}
	strict, err := sigsjson.UnmarshalStrict(raw, typed, sigsjson.DisallowUnknownFields)
	if err != nil {
		return []problem{{Reason: err.Error()}}
	}
	var probs []problem
	for _, e := range strict {
		var fp interface{ FieldPath() string }
		if errors.As(e, &fp) {
			probs = append(probs, problem{Path: fp.FieldPath(), Reason: "unknown field: not in the " + apiVersion + " API (misspelt?)"})
			continue
		}
		probs = append(probs, problem{Reason: e.Error()})
	}
	return probs
}

// checkVMI is the VM validation webhook's check of a VirtualMachine or
// VirtualMachineInstance.
func checkVMI(kind string, raw []byte, obsolete map[string]bool) []problem {
	errs, err := vmadmission.CheckWith(kind, raw, obsolete)
	if err != nil {
		return []problem{{Reason: err.Error()}}
	}
	probs := make([]problem, 0, len(errs))
	for _, e := range errs {
		probs = append(probs, problem{Path: e.Path, Reason: e.Reason})
	}
	return probs
}

// refusedAlready reports whether seen holds path, or a path above or
// below it (an Approx problem names a field below where it is reported).
func refusedAlready(seen map[string]bool, path string) bool {
	for p := range seen {
		if p == path || strings.HasPrefix(path, p+".") || strings.HasPrefix(p, path+".") {
			return true
		}
	}
	return false
}

// checkDataVolume runs the DataVolume controller's checks on dv: its
// source and the claim it creates (with no filesystem overhead: the
// overhead only grows the size). Paths are from the DataVolume's root.
func checkDataVolume(dv *cdiv1.DataVolume) []problem {
	var probs []problem
	if _, err := dvapi.SourceKind(dv); err != nil {
		probs = append(probs, fromMessage(err, "DataVolume "+dv.Namespace+"/"+dv.Name+": "))
	}
	if _, err := datavolume.ClaimSpec(dv, 0); err != nil {
		probs = append(probs, fromMessage(err, "DataVolume "+dv.Namespace+"/"+dv.Name+": "))
	}
	return probs
}

// checkNAD checks a NetworkAttachmentDefinition's spec.config.
func checkNAD(u *unstructured.Unstructured) []problem {
	config, _, _ := unstructured.NestedString(u.Object, "spec", "config")
	if config == "" {
		// nodeplane/network/netattach APISource: the node agent reads the
		// configuration from the object only.
		return []problem{{Path: "spec.config", Reason: "empty: converge's node agent takes the CNI configuration from spec.config (JSON), not from a file on the node"}}
	}
	if _, err := scheduler.NADResource(u); err != nil {
		return []problem{fromMessage(err, "NetworkAttachmentDefinition "+u.GetNamespace()+"/"+u.GetName()+": ")}
	}
	return nil
}

// specPath matches the first field path a controller's message names.
var specPath = regexp.MustCompile(`\bspec(\.[A-Za-z][A-Za-z0-9]*)+`)

// fromMessage turns a controller's error, which names the object (prefix)
// and then the field it refuses ("spec.source.http.url is empty; ..."),
// into a problem at that field. When the message does not start with the
// field (it lists fields, "expected exactly one of spec.source.http, ..."),
// the path is left to the caller's lookup of the deepest field that
// exists (see formatProblems) and the message is kept whole.
func fromMessage(err error, prefix string) problem {
	msg := strings.TrimPrefix(err.Error(), prefix)
	path := specPath.FindString(msg)
	if path == "" {
		return problem{Reason: msg}
	}
	if rest, ok := strings.CutPrefix(msg, path); ok {
		return problem{Path: path, Reason: strings.TrimLeft(rest, ": ")}
	}
	return problem{Path: path, Reason: msg, Approx: true}
}

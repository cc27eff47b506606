package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// operandGroups are the API groups of the operand CRs; the Sync's
// inventory entries of these groups are the CRs converge's native
// operators turn into running roles (the HyperConverged is summarised
// from them).
var operandGroups = []string{"hco.kubevirt.io", "kubevirt.io", "cdi.kubevirt.io", "networkaddonsoperator.network.kubevirt.io",
	"hostpathprovisioner.kubevirt.io", "ssp.kubevirt.io", "aaq.kubevirt.io", "migrations.kubevirt.io", "filerestore.kubevirt.io"}

// operands prints, for the HyperConverged and every operand CR in the
// Sync's inventory, its Available condition as read from the cluster:
// status written by converge's operators from their pods' readiness.
func (d *demo) operands(ctx context.Context) error {
	say("each operand CR's Available condition, written by converge's native operators from their pods' readiness")
	s, err := d.getSync(ctx)
	if err != nil {
		return err
	}
	if s.Status.Inventory == nil {
		return fmt.Errorf("Sync %s/%s has no inventory", syncNS, syncName)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAMESPACE/NAME\tGEN\tAVAILABLE\tREASON\tMESSAGE")
	n := 0
	for _, en := range s.Status.Inventory.Entries {
		parts := strings.Split(en.ID, "_") // <namespace>_<name>_<group>_<kind>
		if len(parts) != 4 || !slices.Contains(operandGroups, parts[2]) {
			continue
		}
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(en.Version)
		u.SetKind(parts[3])
		if err := d.env.Client.Get(ctx, client.ObjectKey{Namespace: parts[0], Name: parts[1]}, u); err != nil {
			return fmt.Errorf("reading %s %s/%s: %w", parts[3], parts[0], parts[1], err)
		}
		a := condition(u, "Available")
		og, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%s\t%s\n", u.GetKind(), strings.TrimPrefix(parts[0]+"/"+parts[1], "/"),
			og, u.GetGeneration(), orDash(a["status"]), orDash(a["reason"]), shorten(fmt.Sprint(a["message"]), 60))
		n++
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("Sync %s/%s: no operand CR in its inventory", syncNS, syncName)
	}
	note("GEN is status.observedGeneration/metadata.generation")
	return nil
}

// condition gives u's status condition of type typ as a map (nil when
// absent).
func condition(u *unstructured.Unstructured, typ string) map[string]any {
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range raw {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}

// orDash gives v as text, "-" for nil or "".
func orDash(v any) string {
	if v == nil || v == "" {
		return "-"
	}
	return fmt.Sprint(v)
}

// kubeVirtObject is the KubeVirt CR converge derives from the example HC.
func kubeVirtObject() *unstructured.Unstructured {
	kv := &unstructured.Unstructured{}
	kv.SetAPIVersion("kubevirt.io/v1")
	kv.SetKind("KubeVirt")
	kv.SetNamespace(hcNamespace)
	kv.SetName(kubeVirt)
	return kv
}

// getKubeVirt reads the KubeVirt CR from the API server.
func (d *demo) getKubeVirt(ctx context.Context) (*unstructured.Unstructured, error) {
	kv := kubeVirtObject()
	if err := d.env.Client.Get(ctx, client.ObjectKeyFromObject(kv), kv); err != nil {
		return nil, fmt.Errorf("reading KubeVirt %s/%s: %w", hcNamespace, kubeVirt, err)
	}
	return kv, nil
}

// kubeVirtField reads the KubeVirt CR and gives the field at path as text
// ("<unset>" when absent).
func (d *demo) kubeVirtField(ctx context.Context, path ...string) (string, error) {
	kv, err := d.getKubeVirt(ctx)
	if err != nil {
		return "", err
	}
	v, ok, err := unstructured.NestedFieldNoCopy(kv.Object, path...)
	if err != nil || !ok {
		return "<unset>", err
	}
	return fmt.Sprint(v), nil
}

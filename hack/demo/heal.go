package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// heal waits for the VM agent to have registered the node, deletes its
// pod and follows the KubeVirt CR's Available and Degraded conditions and
// the agent's pods, read every 200ms, printing each change, until the
// DaemonSet's new pod is Ready and the KubeVirt Available and not
// Degraded again (at most 3 minutes); then it waits for the Sync to be
// Ready again.
func (d *demo) heal(ctx context.Context) error {
	say("self-healing: the VM agent's pod is deleted; the KubeVirt's status follows the real pods")
	if err := d.agentRegistered(ctx); err != nil {
		return err
	}
	pods := &corev1.PodList{}
	if err := d.env.Client.List(ctx, pods, client.InNamespace(hcNamespace), vmAgentPods); err != nil {
		return fmt.Errorf("listing the VM agent's pods (%s): %w", vmAgentLabel, err)
	}
	if len(pods.Items) != 1 {
		return fmt.Errorf("%d VM agent pods (%s in %s), want 1", len(pods.Items), vmAgentLabel, hcNamespace)
	}
	old := pods.Items[0].Name
	start := time.Now()
	if _, err := d.kubectl(ctx, "-n", hcNamespace, "delete", "pod", old, "--wait=false"); err != nil {
		return err
	}
	log := newChangeLog(start)
	var unavailable, degraded time.Duration
	deadline := start.Add(3 * time.Minute)
	for {
		kv, err := d.getKubeVirt(ctx)
		if err != nil {
			return err
		}
		a, g := condition(kv, "Available"), condition(kv, "Degraded")
		log.set("kubevirt", fmt.Sprintf("KubeVirt Available=%s Degraded=%s %s", orDash(a["status"]), orDash(g["status"]), shorten(degradedWhy(g), 80)))
		if a["status"] != "True" && unavailable == 0 {
			unavailable = time.Since(start)
		}
		if g["status"] == "True" && degraded == 0 {
			degraded = time.Since(start)
		}
		if err := d.env.Client.List(ctx, pods, client.InNamespace(hcNamespace), vmAgentPods); err != nil {
			return fmt.Errorf("listing the VM agent's pods: %w", err)
		}
		fresh := false
		for i := range pods.Items {
			p := &pods.Items[i]
			log.set("pod "+p.Name, fmt.Sprintf("pod %s: %s", p.Name, podState(p)))
			fresh = fresh || (p.Name != old && podState(p) == "Ready")
		}
		if fresh && a["status"] == "True" && g["status"] != "True" && observed(kv) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("KubeVirt %s/%s: not Available with a new VM agent pod Ready within 3 minutes of deleting %s", hcNamespace, kubeVirt, old)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	took := time.Since(start)
	if unavailable > 0 {
		d.record("pod deleted → KubeVirt not Available", unavailable)
	}
	if degraded > 0 {
		d.record("pod deleted → KubeVirt Degraded", degraded)
	} else {
		note("the KubeVirt was not seen Degraded=True (read every 200ms): the new pod was ready first")
	}
	d.record("pod deleted → KubeVirt Available again", took)
	note("Available again %s after the delete, with the DaemonSet's new pod Ready", round(took))
	_, err := d.waitSync(ctx, "Ready again", 2*time.Minute, synced)
	return err
}

// agentRegistered waits (at most a minute) until the VM agent has
// registered the node: the label v1alpha1.AgentLabel=true and the KVM
// condition, which it sets once its KVM probe decided the domain type
// (its pod is Ready before that: it runs no readiness probe), and says
// what it decided.
func (d *demo) agentRegistered(ctx context.Context) error {
	name := d.env.Cluster.NodeName
	deadline := time.Now().Add(time.Minute)
	for {
		n := &corev1.Node{}
		if err := d.env.Client.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			return fmt.Errorf("reading Node %s: %w", name, err)
		}
		for _, c := range n.Status.Conditions {
			if c.Type == v1alpha1.KVMCondition && n.Labels[v1alpha1.AgentLabel] == "true" {
				note("the VM agent registered Node %s (%s=true); %s=%s %s:", name, v1alpha1.AgentLabel, c.Type, c.Status, c.Reason)
				note("  %s", shorten(c.Message, 160))
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("Node %s: the VM agent did not register it (label %s, condition %s) within a minute", name, v1alpha1.AgentLabel, v1alpha1.KVMCondition)
		}
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return err
		}
	}
}

// degradedWhy gives the reason and message of a True Degraded condition,
// "" otherwise.
func degradedWhy(g map[string]any) string {
	if g["status"] != "True" {
		return ""
	}
	return strings.TrimSpace(fmt.Sprintf("%v: %v", g["reason"], g["message"]))
}

// observed reports whether u's status.observedGeneration, when set, is
// its generation.
func observed(u *unstructured.Unstructured) bool {
	og, ok, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	return !ok || og == u.GetGeneration()
}

// vmAgentPods selects the VM agent's pods (DaemonSet converge-vm-agent).
var vmAgentPods = client.MatchingLabels{"k8s-app": "converge-vm-agent"}

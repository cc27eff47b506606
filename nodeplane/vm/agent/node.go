package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// NodeOptions configure the agent's Node registration (the heartbeat
// KubeVirt's virt-handler keeps on its Node). Start from
// DefaultNodeOptions.
type NodeOptions struct {
	// Name is the Node's name (the agent's --node-name).
	Name string
	// ReservedMemory is kept back from MemTotal for the host (the agent,
	// libvirtd, QEMU's own overhead); what is left is offered to VMs.
	ReservedMemory resource.Quantity
	// CPUs is the CPU count offered to VMs (runtime.NumCPU by default).
	CPUs int
	// MeminfoPath is read for MemTotal (/proc/meminfo by default).
	MeminfoPath string
	// Interval is how often the registration is renewed (20 s by default:
	// KubeVirt's virt-handler renews its heartbeat every minute, but on a
	// node without a kubelet the agent's Ready heartbeat must come more
	// often than the node lifecycle controller's 40–50 s grace period).
	Interval time.Duration
	// Now is the clock of the heartbeat annotation.
	Now func() time.Time
	// Conditions are the Node conditions the agent owns (the KVM probe's
	// v1alpha1.KVMCondition). RegisterNode writes each one that is absent
	// or differs in status, reason or message, with both times now (the
	// transition time kept when the status is unchanged), leaving every
	// other condition alone.
	Conditions []corev1.NodeCondition
}

// DefaultNodeOptions gives the options for node name: 256 MiB reserved,
// every CPU, /proc/meminfo and a 20 s interval.
func DefaultNodeOptions(name string) NodeOptions {
	return NodeOptions{
		Name:           name,
		ReservedMemory: resource.MustParse("256Mi"),
		CPUs:           runtime.NumCPU(),
		MeminfoPath:    "/proc/meminfo",
		Interval:       20 * time.Second,
		Now:            time.Now,
	}
}

// HostAllocatable gives what this host offers VMs: cpu = opts.CPUs and
// memory = MemTotal of opts.MeminfoPath minus opts.ReservedMemory (at
// least 0). Errors name the meminfo file and say what was expected.
func HostAllocatable(opts NodeOptions) (corev1.ResourceList, error) {
	total, err := memTotal(opts.MeminfoPath)
	if err != nil {
		return nil, err
	}
	mem := resource.NewQuantity(total, resource.BinarySI)
	mem.Sub(opts.ReservedMemory)
	if mem.Sign() < 0 {
		mem = resource.NewQuantity(0, resource.BinarySI)
	}
	return corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(max(opts.CPUs, 0)), resource.DecimalSI),
		corev1.ResourceMemory: *mem,
	}, nil
}

// memTotal reads MemTotal (bytes) from a /proc/meminfo-format file
// ("MemTotal:       24576000 kB").
func memTotal(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		rest, ok := strings.CutPrefix(s.Text(), "MemTotal:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("%s: MemTotal line %q, expected \"MemTotal: <n> kB\"", path, s.Text())
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || kb <= 0 {
			return 0, fmt.Errorf("%s: MemTotal %q, expected a positive number of kB", path, fields[0])
		}
		return kb * 1024, nil
	}
	if err := s.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return 0, fmt.Errorf("%s: no MemTotal line", path)
}

// RegisterNode makes the Node opts.Name a VM node, once: it creates the
// Node when absent (as a kubelet registers itself; converge-node vm also
// runs on hosts without a kubelet, such as the tests'), then merge-patches
// its metadata with the label v1alpha1.AgentLabel=true, KubeVirt's label
// kubevirt.io/schedulable=true, the annotation
// v1alpha1.AllocatableAnnotation = HostAllocatable as a JSON resource list
// (the format the virt-controller's VMI scheduler reads) and KubeVirt's heartbeat
// annotation kubevirt.io/heartbeat = now (RFC 3339), as virt-handler's
// heartbeat does (pkg/virt-handler/heartbeat). Labels, annotations and
// taints set by others are kept. On a Node no kubelet runs (status.nodeInfo
// has no kubeletVersion) the agent also stands in for the kubelet's
// readiness: condition Ready=True with a fresh heartbeat, and no
// NotReadyTaint (see standInForKubelet). It writes opts.Conditions as
// writeConditions says. Errors name the Node.
func RegisterNode(ctx context.Context, c client.Client, opts NodeOptions) error {
	alloc, err := HostAllocatable(opts)
	if err != nil {
		return fmt.Errorf("Node %s: allocatable: %w", opts.Name, err)
	}
	allocJSON, err := json.Marshal(alloc)
	if err != nil {
		return fmt.Errorf("Node %s: allocatable: %w", opts.Name, err)
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: opts.Name}}
	if err := c.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("Node %s: registering: %w", opts.Name, err)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"labels": map[string]string{
			v1alpha1.AgentLabel:        "true",
			kubevirtv1.NodeSchedulable: "true",
		},
		"annotations": map[string]string{
			v1alpha1.AllocatableAnnotation:  string(allocJSON),
			kubevirtv1.VirtHandlerHeartbeat: now().UTC().Format(time.RFC3339),
		},
	}})
	if err != nil {
		return fmt.Errorf("Node %s: %w", opts.Name, err)
	}
	if err := c.Patch(ctx, node, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("Node %s: writing label %s and annotation %s: %w", opts.Name, v1alpha1.AgentLabel, v1alpha1.AllocatableAnnotation, err)
	}
	if err := writeConditions(ctx, c, node, opts.Conditions, now()); err != nil {
		return err
	}
	if node.Status.NodeInfo.KubeletVersion != "" {
		return nil // a kubelet owns the Node's readiness
	}
	return standInForKubelet(ctx, c, opts.Name, now())
}

// writeConditions writes the conditions of want that node (as last read)
// lacks or has with another status, reason or message, in one strategic
// merge patch of the status (conditions merge by type, so the kubelet's
// and others' stay).
func writeConditions(ctx context.Context, c client.Client, node *corev1.Node, want []corev1.NodeCondition, now time.Time) error {
	var changed []corev1.NodeCondition
	for _, w := range want {
		t := metav1.NewTime(now)
		w.LastHeartbeatTime, w.LastTransitionTime = t, t
		for _, have := range node.Status.Conditions {
			if have.Type != w.Type {
				continue
			}
			if have.Status == w.Status {
				if have.Reason == w.Reason && have.Message == w.Message {
					w.Type = "" // unchanged
				}
				w.LastTransitionTime = have.LastTransitionTime
			}
		}
		if w.Type != "" {
			changed = append(changed, w)
		}
	}
	if len(changed) == 0 {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": changed}})
	if err != nil {
		return err
	}
	if err := c.Status().Patch(ctx, node, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
		return fmt.Errorf("Node %s: writing condition %s: %w", node.Name, changed[0].Type, err)
	}
	return nil
}

// NotReadyTaint is the taint the API server's TaintNodesByCondition
// admission puts on every new Node (NoSchedule) until the node lifecycle
// controller sees it Ready.
const NotReadyTaint = "node.kubernetes.io/not-ready"

// standInForKubelet does, for a Node no kubelet registered (status.nodeInfo
// has no kubeletVersion), the kubelet's part that scheduling depends on:
// condition Ready=True (reason ConvergeVMAgentReady) with a heartbeat
// time of now, and the removal of NotReadyTaint, which the API server put
// on the Node when it was created.
func standInForKubelet(ctx context.Context, c client.Client, name string, now time.Time) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	t := metav1.NewTime(now)
	status, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "ConvergeVMAgentReady",
		Message: "converge-node vm runs on this node (no kubelet)", LastHeartbeatTime: t, LastTransitionTime: t,
	}}}})
	if err != nil {
		return err
	}
	// strategic: conditions merge by type, so the agent's others stay
	if err := c.Status().Patch(ctx, node, client.RawPatch(types.StrategicMergePatchType, status)); err != nil {
		return fmt.Errorf("Node %s: writing condition Ready (no kubelet): %w", name, err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			return err
		}
		kept := node.Spec.Taints[:0]
		for _, taint := range node.Spec.Taints {
			if taint.Key != NotReadyTaint {
				kept = append(kept, taint)
			}
		}
		if len(kept) == len(node.Spec.Taints) {
			return nil
		}
		node.Spec.Taints = kept
		return c.Update(ctx, node)
	})
	if err != nil {
		return fmt.Errorf("Node %s: removing taint %s (no kubelet): %w", name, NotReadyTaint, err)
	}
	return nil
}

// KeepNodeRegistered renews the registration (RegisterNode) every
// opts.Interval (1 min when 0) until ctx ends; call RegisterNode once
// first, so that a node that cannot register fails at start. Errors go to
// onError (nil: dropped) and the next period retries.
func KeepNodeRegistered(ctx context.Context, c client.Client, opts NodeOptions, onError func(error)) {
	interval := opts.Interval
	if interval <= 0 {
		interval = time.Minute
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := RegisterNode(ctx, c, opts); err != nil && ctx.Err() == nil && onError != nil {
				onError(err)
			}
		}
	}
}

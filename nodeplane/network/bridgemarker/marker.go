// Package bridgemarker is the node role cluster-network-addons-operator
// gives bridge-marker: a Marker publishes the node's Linux bridges as
// extended resources bridge.network.kubevirt.io/<bridge>
// (v1alpha1.BridgeResourcePrefix) on its Node (`converge-node
// bridge-marker`), which the VMI scheduler counts.
package bridgemarker

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// BridgeCapacity is the capacity each bridge is published with, as
// upstream bridge-marker (pkg/marker: 1000 attachments per bridge).
const BridgeCapacity = 1000

// MarkerOptions configure a Marker.
type MarkerOptions struct {
	// NodeName is the Node whose status gets the resources. Required.
	NodeName string
	// NetNS is the path of the network namespace whose bridges are
	// published ("" means the agent's own, i.e. the host's).
	NetNS string
	// Resync is the longest time between two full syncs, a safety net
	// for missed netlink messages (default 1m, upstream's poll interval).
	Resync time.Duration
	// Settle is how long to wait after a link change for more changes
	// before syncing (default 100ms), so that a burst costs one patch.
	Settle time.Duration
}

// DefaultMarkerOptions gives the host's namespace, a 1m resync and a
// 100ms settle time; NodeName is left to the caller.
func DefaultMarkerOptions() MarkerOptions {
	return MarkerOptions{Resync: time.Minute, Settle: 100 * time.Millisecond}
}

// Marker is converge's bridge-marker: it publishes every Linux bridge of
// a network namespace as the extended resource
// bridge.network.kubevirt.io/<bridge> with capacity and allocatable
// BridgeCapacity on the Node's status, and removes the resource of a
// bridge that is gone. It follows upstream kubevirt/bridge-marker, but
// reacts to netlink link updates instead of only polling.
type Marker struct {
	c client.Client
	o MarkerOptions
}

// NewMarker takes a client and options (zero Resync/Settle take the
// defaults) and gives a Marker; it fails without a node name.
func NewMarker(c client.Client, o MarkerOptions) (*Marker, error) {
	if o.NodeName == "" {
		return nil, fmt.Errorf("bridge-marker: a node name is required")
	}
	d := DefaultMarkerOptions()
	if o.Resync <= 0 {
		o.Resync = d.Resync
	}
	if o.Settle <= 0 {
		o.Settle = d.Settle
	}
	return &Marker{c: c, o: o}, nil
}

// Run syncs once, then again after each link change (after Settle) and at
// least every Resync, until ctx ends (it gives nil then). A failed sync
// is logged and retried a second later; failing to open the namespace or
// to subscribe to link updates is an error.
func (m *Marker) Run(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("bridge-marker")
	h, ns, err := m.handle()
	if err != nil {
		return err
	}
	defer h.Close()
	defer ns.Close()
	updates := make(chan netlink.LinkUpdate, 64)
	done := make(chan struct{})
	defer close(done)
	subErr := make(chan error, 1)
	opts := netlink.LinkSubscribeOptions{ErrorCallback: func(err error) {
		select {
		case subErr <- err:
		default:
		}
	}}
	if m.o.NetNS != "" {
		opts.Namespace = &ns
	}
	if err := netlink.LinkSubscribeWithOptions(updates, done, opts); err != nil {
		return fmt.Errorf("bridge-marker: subscribing to link updates in %s: %w", m.nsName(), err)
	}
	var settle <-chan time.Time
	resync := time.NewTicker(m.o.Resync)
	defer resync.Stop()
	sync := func() {
		if _, err := m.Sync(ctx, h); err != nil {
			logger.Error(err, "publishing bridges")
			settle = time.After(time.Second)
		}
	}
	sync()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-subErr:
			return fmt.Errorf("bridge-marker: link updates in %s: %w", m.nsName(), err)
		case _, ok := <-updates:
			if !ok {
				return fmt.Errorf("bridge-marker: link updates in %s stopped", m.nsName())
			}
			if settle == nil {
				settle = time.After(m.o.Settle)
			}
		case <-settle:
			settle = nil
			sync()
		case <-resync.C:
			sync()
		}
	}
}

func (m *Marker) nsName() string {
	if m.o.NetNS == "" {
		return "the host network namespace"
	}
	return "network namespace " + m.o.NetNS
}

func (m *Marker) handle() (*netlink.Handle, netns.NsHandle, error) {
	if m.o.NetNS == "" {
		h, err := netlink.NewHandle()
		if err != nil {
			return nil, netns.None(), fmt.Errorf("bridge-marker: opening netlink: %w", err)
		}
		return h, netns.None(), nil
	}
	ns, err := netns.GetFromPath(m.o.NetNS)
	if err != nil {
		return nil, ns, fmt.Errorf("bridge-marker: opening network namespace %s: %w", m.o.NetNS, err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		ns.Close()
		return nil, netns.None(), fmt.Errorf("bridge-marker: opening netlink in %s: %w", m.o.NetNS, err)
	}
	return h, ns, nil
}

// Bridges takes a netlink handle and gives the names of its namespace's
// Linux bridges, sorted.
func Bridges(h *netlink.Handle) ([]string, error) {
	links, err := h.LinkList()
	if err != nil {
		return nil, fmt.Errorf("listing links: %w", err)
	}
	var out []string
	for _, l := range links {
		if l.Type() == "bridge" {
			out = append(out, l.Attrs().Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Sync takes a netlink handle, lists the bridges and makes the Node's
// bridge.network.kubevirt.io/* capacity and allocatable match them, with
// one merge patch of the status subresource when they differ. It gives
// the bridges.
func (m *Marker) Sync(ctx context.Context, h *netlink.Handle) ([]string, error) {
	bridges, err := Bridges(h)
	if err != nil {
		return nil, fmt.Errorf("bridge-marker: %s: %w", m.nsName(), err)
	}
	node := &corev1.Node{}
	if err := m.c.Get(ctx, types.NamespacedName{Name: m.o.NodeName}, node); err != nil {
		return nil, fmt.Errorf("Node %s: %w", m.o.NodeName, err)
	}
	want := map[corev1.ResourceName]bool{}
	for _, b := range bridges {
		want[corev1.ResourceName(v1alpha1.BridgeResourcePrefix+b)] = true
	}
	capacity := *resource.NewQuantity(BridgeCapacity, resource.DecimalSI)
	changes := map[string]any{}
	for _, list := range []corev1.ResourceList{node.Status.Capacity, node.Status.Allocatable} {
		for name := range list {
			if strings.HasPrefix(string(name), v1alpha1.BridgeResourcePrefix) && !want[name] {
				changes[string(name)] = nil
			}
		}
	}
	for name := range want {
		c, okC := node.Status.Capacity[name]
		a, okA := node.Status.Allocatable[name]
		if !okC || !okA || c.Cmp(capacity) != 0 || a.Cmp(capacity) != 0 {
			changes[string(name)] = capacity.String()
		}
	}
	if len(changes) == 0 {
		return bridges, nil
	}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"capacity": changes, "allocatable": changes}})
	if err := m.c.Status().Patch(ctx, node, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return nil, fmt.Errorf("Node %s: patching the status with the bridges %v: %w", m.o.NodeName, bridges, err)
	}
	log.FromContext(ctx).WithName("bridge-marker").Info("published bridges", "node", m.o.NodeName, "bridges", bridges)
	return bridges, nil
}

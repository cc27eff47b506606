package bridgemarker_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/nodeplane/network/bridgemarker"
)

// requireRoot skips t when not root, or fails it when
// CONVERGE_REQUIRE_NODEPLANE is set (CI runs as root).
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CONVERGE_REQUIRE_NODEPLANE") != "" {
		t.Fatal("this test needs root (network namespaces) and CONVERGE_REQUIRE_NODEPLANE is set")
	}
	t.Skip("needs root to create a network namespace")
}

// testNetNS creates a named network namespace for t (never touching the
// root one) and gives its path and a netlink handle inside it.
func testNetNS(t *testing.T) (string, *netlink.Handle) {
	t.Helper()
	name := fmt.Sprintf("cvg-bm-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	path := "/run/netns/" + name
	ns, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return path, h
}

// bridgeResources gives the node's bridge resources as name=capacity/allocatable.
func bridgeResources(t *testing.T, c client.Client, node string) []string {
	t.Helper()
	n := &corev1.Node{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	var out []string
	for name, q := range n.Status.Capacity {
		if strings.HasPrefix(string(name), v1alpha1.BridgeResourcePrefix) {
			a := n.Status.Allocatable[name]
			out = append(out, fmt.Sprintf("%s=%s/%s", strings.TrimPrefix(string(name), v1alpha1.BridgeResourcePrefix), q.String(), a.String()))
		}
	}
	slices.Sort(out)
	return out
}

// TestMarkerFollowsBridges runs the marker inside a network namespace the
// test creates, against a Node in a real API server: bridges created and
// deleted with netlink show up and go away as
// bridge.network.kubevirt.io/<bridge> resources (capacity 1k), through
// link updates alone (the resync is an hour), and other links and other
// resources are left alone.
func TestMarkerFollowsBridges(t *testing.T) {
	requireRoot(t)
	c := controlplane.StartForTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	path, h := testNetNS(t)

	if err := h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br-pre"}}); err != nil {
		t.Fatal(err)
	}
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "veth0"}, PeerName: "veth1"}); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	if err := c.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	node.Status.Capacity = corev1.ResourceList{"cpu": *resourceQ("2"), v1alpha1.BridgeResourcePrefix + "stale": *resourceQ("1k")}
	node.Status.Allocatable = node.Status.Capacity
	if err := c.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}

	m, err := bridgemarker.NewMarker(c, bridgemarker.MarkerOptions{NodeName: "node-1", NetNS: path, Resync: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- m.Run(ctx) }()
	expect := func(want ...string) {
		t.Helper()
		start := time.Now()
		controlplane.Eventually(t, 10*time.Second, func() bool {
			return slices.Equal(bridgeResources(t, c, "node-1"), want)
		})
		t.Logf("node shows %v after %s", want, time.Since(start).Round(time.Millisecond))
	}
	expect("br-pre=1k/1k") // the stale one removed, the veths ignored

	for _, b := range []string{"br-a", "br-b"} {
		if err := h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: b}}); err != nil {
			t.Fatal(err)
		}
	}
	expect("br-a=1k/1k", "br-b=1k/1k", "br-pre=1k/1k")

	br, err := h.LinkByName("br-pre")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.LinkDel(br); err != nil {
		t.Fatal(err)
	}
	expect("br-a=1k/1k", "br-b=1k/1k")

	n := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: "node-1"}, n); err != nil {
		t.Fatal(err)
	}
	if q := n.Status.Capacity["cpu"]; q.String() != "2" {
		t.Errorf("the marker changed the cpu capacity to %s", q.String())
	}
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("Run: %v", err)
	}
}

func resourceQ(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

package macpool_test

import (
	"context"
	"encoding/json"
	"fmt"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/webhooktest"
	"github.com/converge-dev/converge/operators/network/macpool"
)

// createVMs creates count VMs named prefix-NNNN with one NIC without a
// MAC from workers goroutines, and gives name → MAC and each creation's
// latency.
func createVMs(t testing.TB, c client.Client, prefix string, count, workers int) (map[string]string, []time.Duration) {
	t.Helper()
	var (
		mu   sync.Mutex
		macs = map[string]string{}
		lat  []time.Duration
		errs []error
		wg   sync.WaitGroup
	)
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				vm := newVM("default", fmt.Sprintf("%s-%04d", prefix, i), nic("default", ""))
				start := time.Now()
				err := c.Create(context.Background(), vm)
				d := time.Since(start)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					macs[vm.GetName()] = macsOf(t, vm)[0]
					lat = append(lat, d)
				}
				mu.Unlock()
			}
		})
	}
	for i := range count {
		next <- i
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d creations failed, first: %v", len(errs), count, errs[0])
	}
	return macs, lat
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*p)]
}

// TestPoolThroughAPIServer drives the webhook through a real API server:
// 1,000 concurrent creations get 1,000 distinct MACs of the (random,
// locally administered) range; a user MAC another VM holds is refused
// naming that VM; a MAC given twice in one VM is refused; an update that
// drops the field keeps the MAC; removing a NIC and deleting a VM free
// their MACs; and a new instance keeps the range and every allocation.
func TestPoolThroughAPIServer(t *testing.T) {
	cl := startCluster(t)
	ctx := context.Background()
	o := macpool.Options{ConfigMap: types.NamespacedName{Namespace: poolNS, Name: "converge-macpool"}}
	p1 := cl.startPool(t, o)
	r := p1.ctl.Pool().Range()
	if !r.Start.LocallyAdministered() || r.Start.Multicast() || r.Size() != 1<<24 {
		t.Fatalf("random range %s: want 2^24 locally administered unicast addresses", r)
	}

	start := time.Now()
	macs, lat := createVMs(t, cl.c, "vm", 1000, 32)
	elapsed := time.Since(start)
	t.Logf("1000 VMs from 32 goroutines in %s: %.0f MACs/s through the API server; create latency p50 %s p99 %s max %s",
		elapsed.Round(time.Millisecond), 1000/elapsed.Seconds(), percentile(lat, .5), percentile(lat, .99), percentile(lat, 1))
	held := map[string]string{} // MAC → VM
	for name, mac := range macs {
		m, err := macpool.ParseMAC(mac)
		if err != nil || !r.Contains(m) || m.String() != mac {
			t.Fatalf("VM %s got MAC %q: want an address of %s in KubeVirt's form", name, mac, r)
		}
		if other, dup := held[mac]; dup {
			t.Fatalf("VMs %s and %s both got MAC %s", other, name, mac)
		}
		held[mac] = name
	}
	if len(held) != 1000 {
		t.Fatalf("%d distinct MACs, want 1000", len(held))
	}
	// Every reservation is settled once the informer saw the VMs stored.
	controlplane.Eventually(t, 30*time.Second, func() bool {
		return len(cl.reservations(t, o.ConfigMap.Name)) == 0 && p1.ctl.Pool().Used() == 1000
	})

	get := func(name string) *unstructured.Unstructured {
		vm := newVM("default", name)
		if err := cl.c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
			t.Fatal(err)
		}
		return vm
	}
	denied := func(t *testing.T, err error, want ...string) {
		t.Helper()
		if err == nil {
			t.Fatal("the request was admitted")
		}
		t.Logf("refused: %v", err)
		for _, w := range append([]string{fmt.Sprintf("admission webhook %q denied the request", macpool.WebhookName)}, want...) {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("the refusal lacks %q", w)
			}
		}
	}

	t.Run("colliding user MAC is refused naming the holder", func(t *testing.T) {
		taken := macs["vm-0000"]
		err := cl.c.Create(ctx, newVM("default", "thief", nic("default", strings.ToUpper(taken))))
		denied(t, err, `VirtualMachine default/thief: interface "default"`, "MAC "+taken+" is already in use by VirtualMachine default/vm-0000")
		// The same through an update of another VM.
		vm := get("vm-0001")
		_ = unstructured.SetNestedSlice(vm.Object, []any{map[string]any{"name": "default", "macAddress": taken}}, "spec", "template", "spec", "domain", "devices", "interfaces")
		denied(t, cl.c.Update(ctx, vm), "already in use by VirtualMachine default/vm-0000")
	})

	t.Run("free user MAC is kept and then protected", func(t *testing.T) {
		own := newVM("default", "own", nic("default", "0e:00:00:00:00:07"))
		if err := cl.c.Create(ctx, own); err != nil {
			t.Fatal(err)
		}
		if got := macsOf(t, own)[0]; got != "0e:00:00:00:00:07" {
			t.Fatalf("user MAC became %q", got)
		}
		denied(t, cl.c.Create(ctx, newVM("default", "own2", nic("a", "0e:00:00:00:00:07"))), "in use by VirtualMachine default/own")
	})

	t.Run("MAC given twice in one VM is refused", func(t *testing.T) {
		err := cl.c.Create(ctx, newVM("default", "twice", nic("a", "0e:00:00:00:00:08"), nic("b", "0e:00:00:00:00:08")))
		denied(t, err, `interface "b"`, `is also given to interface "a"`)
		if vms, res := p1.ctl.Pool().Holders(mustMAC(t, "0e:00:00:00:00:08")); len(vms) > 0 || res != "" {
			t.Errorf("a refused request left 0e:00:00:00:00:08 held by %v / reserved by %q", vms, res)
		}
	})

	t.Run("update without the field keeps the MAC", func(t *testing.T) {
		vm := get("vm-0001")
		_ = unstructured.SetNestedSlice(vm.Object, []any{map[string]any{"name": "default", "bridge": map[string]any{}}}, "spec", "template", "spec", "domain", "devices", "interfaces")
		vm.SetLabels(map[string]string{"updated": "yes"})
		if err := cl.c.Update(ctx, vm); err != nil {
			t.Fatal(err)
		}
		if got := macsOf(t, vm)[0]; got != macs["vm-0001"] {
			t.Fatalf("the update changed the MAC %s to %q", macs["vm-0001"], got)
		}
	})

	t.Run("NIC removal and deletion free the MAC", func(t *testing.T) {
		vm := get("vm-0002")
		_ = unstructured.SetNestedSlice(vm.Object, []any{}, "spec", "template", "spec", "domain", "devices", "interfaces")
		if err := cl.c.Update(ctx, vm); err != nil {
			t.Fatal(err)
		}
		if err := cl.c.Delete(ctx, get("vm-0003")); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"vm-0002", "vm-0003"} {
			m := mustMAC(t, macs[name])
			controlplane.Eventually(t, 10*time.Second, func() bool {
				vms, res := p1.ctl.Pool().Holders(m)
				return len(vms) == 0 && res == ""
			})
			delete(held, macs[name])
		}
		// The freed MAC can be given by a user now.
		reuse := newVM("default", "reuse", nic("default", macs["vm-0003"]))
		if err := cl.c.Create(ctx, reuse); err != nil {
			t.Fatalf("a freed MAC was refused: %v", err)
		}
		held[macs["vm-0003"]] = "reuse"
	})

	t.Run("a new instance keeps the range and every allocation", func(t *testing.T) {
		p1.cancel()
		p2 := cl.startPool(t, o)
		if got := p2.ctl.Pool().Range(); got != r {
			t.Fatalf("the restarted pool has range %s, want the stored %s", got, r)
		}
		if got := p2.ctl.Pool().Used(); got != uint64(len(held)) {
			t.Fatalf("the restarted pool has %d addresses of the range in use, want %d", got, len(held))
		}
		more, _ := createVMs(t, cl.c, "after", 200, 16)
		for name, mac := range more {
			if other, dup := held[mac]; dup {
				t.Fatalf("after the restart VM %s got MAC %s, held by %s", name, mac, other)
			}
			held[mac] = name
		}
		denied(t, cl.c.Create(ctx, newVM("default", "thief2", nic("x", macs["vm-0999"]))), "in use by VirtualMachine default/vm-0999")
	})
}

// TestSmallRangeReservationsAndExhaustion uses a range of 4 addresses. A
// MAC handed out by an admission whose VM was never stored (the API
// server died after the webhook answered) survives a restart of the pool
// through the reservations ConfigMap, so a new instance refuses the 4th
// VM with the exhaustion message; once the reservation expires with no VM
// holding it, the address is handed out again; deleting a VM frees its
// MAC for the next creation.
func TestSmallRangeReservationsAndExhaustion(t *testing.T) {
	cl := startCluster(t)
	ctx := context.Background()
	r, err := macpool.ParseRange("02:00:00:00:00:01", "02:00:00:00:00:04")
	if err != nil {
		t.Fatal(err)
	}
	o := macpool.Options{Range: r, ConfigMap: types.NamespacedName{Namespace: poolNS, Name: "small"}, ReservationTTL: time.Hour}
	p1 := cl.startPool(t, o)
	got := map[string]string{}
	for _, name := range []string{"a", "b", "c"} {
		vm := newVM("default", name, nic("default", ""))
		if err := cl.c.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
		got[name] = macsOf(t, vm)[0]
	}

	// An admission answered, its VM never stored.
	raw, _ := json.Marshal(newVM("default", "ghost", nic("default", "")).Object)
	resp := p1.ctl.Handle(ctx, ctrladmission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Namespace: "default", Name: "ghost", Object: runtime.RawExtension{Raw: raw}}})
	if !resp.Allowed || len(resp.Patches) != 1 {
		t.Fatalf("ghost admission: %+v", resp.Result)
	}
	ghostMAC, _ := resp.Patches[0].Value.(string)
	if resp.Patches[0].Path != "/spec/template/spec/domain/devices/interfaces/0/macAddress" {
		t.Fatalf("ghost admission patched %s, want the NIC's macAddress", resp.Patches[0].Path)
	}
	if _, ok := cl.reservations(t, "small")[strings.ReplaceAll(ghostMAC, ":", "-")]; !ok {
		t.Fatalf("the ghost's MAC %q is not in the reservations ConfigMap %v", ghostMAC, cl.reservations(t, "small"))
	}

	p1.cancel()
	p2 := cl.startPool(t, o)
	err = cl.c.Create(ctx, newVM("default", "d", nic("default", "")))
	if err == nil || !strings.Contains(err.Error(), `VirtualMachine default/d: interface "default"`) ||
		!strings.Contains(err.Error(), "the MAC pool 02:00:00:00:00:01–02:00:00:00:00:04 is exhausted: all 4 addresses are in use") {
		t.Fatalf("a 4th VM with the ghost's reservation restored: want the exhaustion message, got %v", err)
	}
	t.Logf("refused: %v", err)

	// The reservation expires (no VM holds it) on an instance with a short TTL.
	p2.cancel()
	o.ReservationTTL = 500 * time.Millisecond
	cl.startPool(t, o)
	var d *unstructured.Unstructured
	controlplane.Eventually(t, 20*time.Second, func() bool {
		d = newVM("default", "d", nic("default", ""))
		return cl.c.Create(ctx, d) == nil
	})
	if macsOf(t, d)[0] != ghostMAC {
		t.Fatalf("VM d got %s, want the expired reservation's %s", macsOf(t, d)[0], ghostMAC)
	}

	if err := cl.c.Delete(ctx, newVM("default", "b")); err != nil {
		t.Fatal(err)
	}
	var e *unstructured.Unstructured
	controlplane.Eventually(t, 20*time.Second, func() bool {
		e = newVM("default", "e", nic("default", ""))
		return cl.c.Create(ctx, e) == nil
	})
	if macsOf(t, e)[0] != got["b"] {
		t.Fatalf("VM e got %s, want deleted b's %s", macsOf(t, e)[0], got["b"])
	}
}

func mustMAC(t testing.TB, s string) macpool.MAC {
	t.Helper()
	m, err := macpool.ParseMAC(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// BenchmarkCreateThroughAPIServer measures VM creations through a real API
// server, 32 in flight: "no-webhook" first (the floor: the API server
// storing VMs, before any webhook is registered), then "noop-webhook"
// (the anchor: the same MutatingWebhookConfiguration answering every VM
// allowed without a patch, what any mutating webhook costs the API
// server), then "macpool" (the webhook allocates a MAC, reserves it in
// the ConfigMap and patches it in per VM). macpool reports its VMs/s as a
// ratio to each of the other two of the same run (x-no-webhook,
// x-noop-webhook).
func BenchmarkCreateThroughAPIServer(b *testing.B) {
	cl := startCluster(b)
	var n atomic.Int64
	create := func(b *testing.B, withNIC bool) float64 {
		var done atomic.Int64
		b.SetParallelism(max(1, 32/goruntime.GOMAXPROCS(0)))
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				vm := newVM("default", fmt.Sprintf("bench-%d", n.Add(1)), nic("default", ""))
				if err := cl.c.Create(context.Background(), vm); err != nil {
					b.Error(err)
					return
				}
				if withNIC && macsOf(b, vm)[0] == "" {
					b.Error("a VM was stored without a MAC")
					return
				}
				done.Add(1)
			}
		})
		rate := float64(done.Load()) / b.Elapsed().Seconds()
		b.ReportMetric(rate, "VMs/s")
		return rate
	}
	var floor, noop float64
	b.Run("no-webhook", func(b *testing.B) { floor = create(b, false) })
	cl.startNoopWebhook(b)
	b.Run("noop-webhook", func(b *testing.B) { noop = create(b, false) })
	o := macpool.Options{ConfigMap: types.NamespacedName{Namespace: poolNS, Name: "bench"}}
	cl.startPool(b, o)
	b.Run("macpool", func(b *testing.B) {
		rate := create(b, true)
		if floor > 0 && noop > 0 {
			b.ReportMetric(rate/floor, "x-no-webhook")
			b.ReportMetric(rate/noop, "x-noop-webhook")
		}
	})
}

// startNoopWebhook registers the MAC pool's MutatingWebhookConfiguration
// (same name, rules, failure policy and timeout) served by a handler that
// allows every request without a patch, and waits until the API server
// calls it. startPool later replaces it with the pool's.
func (cl *cluster) startNoopWebhook(b *testing.B) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	var calls atomic.Int64
	w := macpool.Webhook(nil)
	for i := range w.Handlers {
		w.Handlers[i].Handler = &ctrlwebhook.Admission{Handler: ctrladmission.HandlerFunc(
			func(context.Context, ctrladmission.Request) ctrladmission.Response {
				calls.Add(1)
				return ctrladmission.Allowed("")
			})}
	}
	ep := webhooktest.Serve(b, ctx, cl.certs, w)
	if err := w.Apply(ctx, cl.c, ep, cl.certs.CABundle(), "converge-test"); err != nil {
		b.Fatal(err)
	}
	controlplane.Eventually(b, 30*time.Second, func() bool {
		vm := newVM("default", "probe", nic("default", ""))
		return cl.c.Create(ctx, vm, client.DryRunAll) == nil && calls.Load() > 0
	})
}

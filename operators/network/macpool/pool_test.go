package macpool_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/operators/network/macpool"
)

func TestParseRange(t *testing.T) {
	for _, c := range []struct {
		start, end string
		size       uint64
		err        string
	}{
		{"02:00:00:00:00:00", "02:00:00:00:00:ff", 256, ""},
		{"02-00-00-00-00-05", "02-00-00-00-00-05", 1, ""},
		{"02:00:00:00:00:10", "02:00:00:00:00:01", 0, "rangeStart 02:00:00:00:00:10 is after rangeEnd 02:00:00:00:00:01"},
		{"03:00:00:00:00:00", "03:00:00:00:00:01", 0, "not unicast"},
		{"02:00:00:00:00", "02:00:00:00:00:01", 0, "kubeMacPool.rangeStart"},
		{"02:00:00:00:00:00", "00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01", 0, "want a 48-bit MAC"},
	} {
		r, err := macpool.ParseRange(c.start, c.end)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseRange(%s, %s) = %v, want error with %q", c.start, c.end, err, c.err)
			}
			continue
		}
		if err != nil || r.Size() != c.size {
			t.Errorf("ParseRange(%s, %s) = %s (size %d), %v; want size %d", c.start, c.end, r, r.Size(), err, c.size)
		}
	}
}

func TestRandomRange(t *testing.T) {
	seen := map[macpool.Range]bool{}
	for range 20 {
		r, err := macpool.RandomRange(nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Start>>40 != 0x02 || r.Size() != 1<<24 || r.Start&0xffffff != 0 || r.Validate() != nil {
			t.Fatalf("RandomRange gave %s: want 02:xx:xx:00:00:00–02:xx:xx:ff:ff:ff", r)
		}
		seen[r] = true
	}
	if len(seen) < 2 {
		t.Errorf("20 random ranges were all %v", seen)
	}
}

func TestPoolNextFitExhaustionAndRelease(t *testing.T) {
	r, _ := macpool.ParseRange("02:00:00:00:00:01", "02:00:00:00:00:03")
	p := macpool.NewPool(r)
	now := time.Unix(1000, 0)
	var got []string
	for i := range 3 {
		m, err := p.Allocate(fmt.Sprintf("ns/vm%d", i), now)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m.String())
	}
	if want := "02:00:00:00:00:01 02:00:00:00:00:02 02:00:00:00:00:03"; strings.Join(got, " ") != want {
		t.Fatalf("allocated %v, want %s", got, want)
	}
	var ex *macpool.ExhaustedError
	if _, err := p.Allocate("ns/vm3", now); !errors.As(err, &ex) {
		t.Fatalf("a 4th allocation gave %v, want ExhaustedError", err)
	}
	// vm1 is stored with its MAC, then deleted: the address comes back,
	// found by wrapping the cursor around.
	m1 := mustMAC(t, got[1])
	if res, _ := p.Commit("ns/vm1", []macpool.MAC{m1}); len(res) != 1 || res[0].Owner != "ns/vm1" {
		t.Fatalf("Commit resolved %v, want vm1's reservation", res)
	}
	p.Commit("ns/vm1", nil)
	if m, err := p.Allocate("ns/vm4", now); err != nil || m != m1 {
		t.Fatalf("after deleting vm1: Allocate = %s, %v; want %s", m, err, m1)
	}
	if p.Used() != 3 {
		t.Errorf("Used = %d, want 3", p.Used())
	}
}

// TestPoolSkipsMasqueradeBridgeMAC: a range starting at the masquerade
// bridge's MAC (v1alpha1.MasqueradeBridgeMAC, HCO's documented
// rangeStart) never hands it out, even when every other address is
// taken; the VM agent would refuse it on a masquerade NIC.
func TestPoolSkipsMasqueradeBridgeMAC(t *testing.T) {
	r, _ := macpool.ParseRange(v1alpha1.MasqueradeBridgeMAC, "02:00:00:00:00:02")
	p := macpool.NewPool(r)
	now := time.Unix(1000, 0)
	var got []string
	for i := range 2 {
		m, err := p.Allocate(fmt.Sprintf("ns/vm%d", i), now)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m.String())
	}
	if want := "02:00:00:00:00:01 02:00:00:00:00:02"; strings.Join(got, " ") != want {
		t.Fatalf("allocated %v, want %s", got, want)
	}
	var ex *macpool.ExhaustedError
	if m, err := p.Allocate("ns/vm2", now); !errors.As(err, &ex) {
		t.Fatalf("a 3rd allocation gave %s, %v; want ExhaustedError (only the bridge's MAC is left)", m, err)
	}
}

func TestPoolClaim(t *testing.T) {
	r, _ := macpool.ParseRange("02:00:00:00:00:00", "02:00:00:00:00:0f")
	p := macpool.NewPool(r)
	now := time.Unix(1000, 0)
	m := mustMAC(t, "02:00:00:00:00:05")
	outside := mustMAC(t, "0e:00:00:00:00:01")
	p.Commit("ns/a", []macpool.MAC{m, outside})
	for _, c := range []struct {
		mac    macpool.MAC
		owner  string
		newly  bool
		holder string
	}{
		{m, "ns/a", false, ""},           // its own, stored
		{m, "ns/b", false, "ns/a"},       // another VM's
		{outside, "ns/b", false, "ns/a"}, // tracked outside the range too
		{mustMAC(t, "02:00:00:00:00:06"), "ns/b", true, ""},
		{mustMAC(t, "02:00:00:00:00:06"), "ns/c", false, "ns/b"}, // reserved by b
	} {
		newly, err := p.Claim(c.mac, c.owner, now)
		var inUse *macpool.InUseError
		switch {
		case c.holder != "" && (!errors.As(err, &inUse) || inUse.Holder != c.holder):
			t.Errorf("Claim(%s, %s) = %v, want in use by %s", c.mac, c.owner, err, c.holder)
		case c.holder != "" && !strings.HasPrefix(err.Error(), fmt.Sprintf("MAC %s is already in use by VirtualMachine %s", c.mac, c.holder)):
			// Stored or reserved, the refusal reads the same.
			t.Errorf("Claim(%s, %s) refusal %q does not name the holder in the usual words", c.mac, c.owner, err)
		case c.holder == "" && (err != nil || newly != c.newly):
			t.Errorf("Claim(%s, %s) = %v, %v; want %v, nil", c.mac, c.owner, newly, err, c.newly)
		}
	}
	// A stale Unreserve (older reservation) does not drop a newer one.
	if p.Unreserve(macpool.Reservation{MAC: mustMAC(t, "02:00:00:00:00:06"), Owner: "ns/b", Since: now.Add(-time.Second)}) {
		t.Error("Unreserve dropped a reservation made at another time")
	}
	if exp := p.Expired(now.Add(time.Second)); len(exp) != 1 || exp[0].Owner != "ns/b" {
		t.Errorf("Expired = %v, want b's reservation", exp)
	}
}

// TestPoolConcurrentAllocate: goroutines allocating at once never get one
// address twice (run with -race).
func TestPoolConcurrentAllocate(t *testing.T) {
	r, _ := macpool.ParseRange("02:00:00:00:00:00", "02:00:00:00:ff:ff")
	p := macpool.NewPool(r)
	var mu sync.Mutex
	seen := map[macpool.MAC]bool{}
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for i := range 500 {
				m, err := p.Allocate(fmt.Sprintf("ns/g%d-%d", g, i), time.Now())
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[m] {
					t.Errorf("%s handed out twice", m)
				}
				seen[m] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != 32*500 || p.Used() != 32*500 {
		t.Errorf("%d distinct, Used %d; want %d", len(seen), p.Used(), 32*500)
	}
}

// BenchmarkPoolAllocate measures the allocator alone: one Allocate and one
// Unreserve per op, on a 2^24 range with 100,000 addresses held.
func BenchmarkPoolAllocate(b *testing.B) {
	r, _ := macpool.RandomRange(nil)
	p := macpool.NewPool(r)
	now := time.Now()
	for i := range 100_000 {
		if _, err := p.Allocate(fmt.Sprintf("ns/held%d", i), now); err != nil {
			b.Fatal(err)
		}
	}
	var n atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			owner := "ns/bench"
			m, err := p.Allocate(owner, now)
			if err != nil {
				b.Error(err)
				return
			}
			p.Unreserve(macpool.Reservation{MAC: m, Owner: owner, Since: now})
			n.Add(1)
		}
	})
	b.ReportMetric(float64(n.Load())/b.Elapsed().Seconds(), "MACs/s")
}

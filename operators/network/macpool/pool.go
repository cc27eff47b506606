package macpool

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/converge-dev/converge/api/v1alpha1"
)

// Pool is the in-memory allocation table: which MAC each stored
// VirtualMachine holds (committed, learned from the API) and which MACs
// are reserved by admissions whose VirtualMachine is not stored yet. It
// tracks every MAC, in the range or not; only Allocate is limited to the
// range. It is safe for concurrent use: every method takes one mutex, so
// two callers never get one MAC. It is not the truth on its own: the
// Controller rebuilds it from the VirtualMachines and the reservations
// ConfigMap.
type Pool struct {
	mu      sync.Mutex
	r       Range
	entries map[MAC]*entry
	byVM    map[string]map[MAC]struct{}
	next    MAC    // next-fit cursor, as kubemacpool's pool-manager
	used    uint64 // entries inside r
}

type entry struct {
	vms      []string // VirtualMachines whose stored spec holds the MAC (normally one)
	reserved string   // owner of an in-flight reservation, "" for none
	since    time.Time
}

func (e *entry) free() bool { return len(e.vms) == 0 && e.reserved == "" }

// holder gives who holds the entry, for an owner other than owner: a
// stored VM first, then a reservation; "" when only owner holds it.
func (e *entry) holder(owner string) (string, bool) {
	for _, v := range e.vms {
		if v != owner {
			return v, false
		}
	}
	if e.reserved != "" && e.reserved != owner {
		return e.reserved, true
	}
	return "", false
}

// Reservation is a MAC handed out by an admission whose VirtualMachine
// has not been seen stored yet.
type Reservation struct {
	// MAC is the reserved address.
	MAC MAC
	// Owner is the VirtualMachine's namespace/name.
	Owner string
	// Since is when the reservation was made.
	Since time.Time
}

// InUseError is the refusal of a MAC another VirtualMachine holds.
type InUseError struct {
	// MAC is the contested address.
	MAC MAC
	// Holder is the namespace/name of the VirtualMachine that holds it.
	Holder string
	// Pending is true when Holder's admission is in flight (reserved, not
	// stored yet).
	Pending bool
}

// Error gives "MAC <mac> is already in use by VirtualMachine <ns/name>",
// with " (admission in progress)" when the holder is reserved but not
// stored yet: the same words either way, so a refusal reads the same
// whether or not the informer has seen the holder.
func (e *InUseError) Error() string {
	if e.Pending {
		return fmt.Sprintf("MAC %s is already in use by VirtualMachine %s (admission in progress)", e.MAC, e.Holder)
	}
	return fmt.Sprintf("MAC %s is already in use by VirtualMachine %s", e.MAC, e.Holder)
}

// ExhaustedError is the refusal of an allocation when every address of
// the range is in use.
type ExhaustedError struct {
	// Range is the pool's range.
	Range Range
}

// Error gives "the MAC pool <start>–<end> is exhausted: all <n> addresses
// are in use".
func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("the MAC pool %s is exhausted: all %d addresses are in use", e.Range, e.Range.Size())
}

// NewPool takes a valid range and gives an empty Pool.
func NewPool(r Range) *Pool {
	return &Pool{r: r, entries: map[MAC]*entry{}, byVM: map[string]map[MAC]struct{}{}, next: r.Start}
}

// Range gives the pool's range.
func (p *Pool) Range() Range { return p.r }

// Used gives how many addresses of the range are in use (stored or
// reserved).
func (p *Pool) Used() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.used
}

// Allocate takes an owner (namespace/name) and the time, and reserves the
// next free address of the range after the last one handed out (next-fit,
// wrapping around; as kubemacpool's getFreeMac), never the masquerade
// bridge's (v1alpha1.MasqueradeBridgeMAC). It fails with *ExhaustedError
// when the range is full.
func (p *Pool) Allocate(owner string, now time.Time) (MAC, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	size := p.r.Size()
	if p.used >= size {
		return 0, &ExhaustedError{Range: p.r}
	}
	m := p.next
	for range size {
		if !p.r.Contains(m) {
			m = p.r.Start
		}
		if _, taken := p.entries[m]; !taken && m != masqueradeBridgeMAC {
			p.reserve(m, owner, now)
			p.next = m + 1
			return m, nil
		}
		m++
	}
	return 0, &ExhaustedError{Range: p.r} // every other address is taken: the bridge's was left
}

// masqueradeBridgeMAC is v1alpha1.MasqueradeBridgeMAC, which Allocate skips.
var masqueradeBridgeMAC = func() MAC {
	m, err := ParseMAC(v1alpha1.MasqueradeBridgeMAC)
	if err != nil {
		panic("macpool: v1alpha1.MasqueradeBridgeMAC: " + err.Error())
	}
	return m
}()

// Claim takes an address the user chose, an owner and the time, and
// reserves it for owner. It gives whether a reservation was made or
// refreshed (false when owner's stored VirtualMachine already holds it),
// and *InUseError when another VirtualMachine holds or has reserved it.
func (p *Pool) Claim(m MAC, owner string, now time.Time) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.entries[m]
	if e == nil {
		p.reserve(m, owner, now)
		return true, nil
	}
	if h, pending := e.holder(owner); h != "" {
		return false, &InUseError{MAC: m, Holder: h, Pending: pending}
	}
	if slices.Contains(e.vms, owner) && e.reserved == "" {
		return false, nil
	}
	e.reserved, e.since = owner, now
	return true, nil
}

// Unreserve takes a reservation and drops it if it is still current (same
// owner, same time): an admission that failed, a dry run, or an expired
// reservation no stored VirtualMachine holds. The address is free again
// unless a stored VirtualMachine holds it. It reports whether it dropped.
func (p *Pool) Unreserve(r Reservation) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.entries[r.MAC]
	if e == nil || e.reserved != r.Owner || !e.since.Equal(r.Since) {
		return false
	}
	e.reserved = ""
	p.dropIfFree(r.MAC, e)
	return true
}

// Restore takes a reservation read back from the reservations ConfigMap
// after a restart and records it unless the address is already
// reserved.
func (p *Pool) Restore(r Reservation) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.entries[r.MAC]
	if e == nil {
		p.reserve(r.MAC, r.Owner, r.Since)
		return
	}
	if e.reserved == "" && len(e.vms) == 0 {
		e.reserved, e.since = r.Owner, r.Since
	}
}

// Commit takes a VirtualMachine's namespace/name and the MACs its stored
// spec holds (nil when it was deleted), and makes them its exact set: an
// address it no longer holds is released (unless reserved), and a
// reservation of an address it holds is resolved. It gives the resolved
// reservations (to be dropped from the reservations ConfigMap) and the
// addresses another stored VirtualMachine holds too (duplicates stored
// without this pool's webhook).
func (p *Pool) Commit(vm string, macs []MAC) (resolved []Reservation, duplicates []MAC) {
	p.mu.Lock()
	defer p.mu.Unlock()
	want := make(map[MAC]struct{}, len(macs))
	for _, m := range macs {
		want[m] = struct{}{}
	}
	for m := range p.byVM[vm] {
		if _, keep := want[m]; keep {
			continue
		}
		e := p.entries[m]
		e.vms = slices.DeleteFunc(e.vms, func(v string) bool { return v == vm })
		p.dropIfFree(m, e)
	}
	if len(want) == 0 {
		delete(p.byVM, vm)
		return nil, nil
	}
	p.byVM[vm] = want
	for m := range want {
		e := p.entries[m]
		if e == nil {
			e = &entry{}
			p.entries[m] = e
			if p.r.Contains(m) {
				p.used++
			}
		}
		if !slices.Contains(e.vms, vm) {
			e.vms = append(e.vms, vm)
		}
		if len(e.vms) > 1 {
			duplicates = append(duplicates, m)
		}
		// A stored VM holding m settles any reservation of m: the owner's
		// own, or one made under a name the API server had not generated yet.
		if e.reserved != "" {
			resolved = append(resolved, Reservation{MAC: m, Owner: e.reserved, Since: e.since})
			e.reserved = ""
		}
	}
	return resolved, duplicates
}

// Expired takes a time and gives the reservations made before it.
func (p *Pool) Expired(before time.Time) []Reservation {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Reservation
	for m, e := range p.entries {
		if e.reserved != "" && e.since.Before(before) {
			out = append(out, Reservation{MAC: m, Owner: e.reserved, Since: e.since})
		}
	}
	return out
}

// Holders gives the stored VirtualMachines holding m and the owner of its
// reservation ("" when none).
func (p *Pool) Holders(m MAC) (vms []string, reserved string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.entries[m]; e != nil {
		return slices.Clone(e.vms), e.reserved
	}
	return nil, ""
}

func (p *Pool) reserve(m MAC, owner string, now time.Time) {
	p.entries[m] = &entry{reserved: owner, since: now}
	if p.r.Contains(m) {
		p.used++
	}
}

func (p *Pool) dropIfFree(m MAC, e *entry) {
	if !e.free() {
		return
	}
	delete(p.entries, m)
	if p.r.Contains(m) {
		p.used--
	}
}

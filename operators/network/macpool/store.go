package macpool

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Annotations of the reservations ConfigMap that keep the pool's range, so
// that a random range survives restarts (cluster-network-addons-operator
// writes it into the NetworkAddonsConfig instead).
const (
	// RangeStartAnnotation holds the range's first address.
	RangeStartAnnotation = "macpool.converge.dev/range-start"
	// RangeEndAnnotation holds the range's last address.
	RangeEndAnnotation = "macpool.converge.dev/range-end"
)

// record is a reservation as stored in the ConfigMap, under the MAC's
// data key (02-00-00-00-00-01).
type record struct {
	Owner string    `json:"owner"`
	Since time.Time `json:"since"`
}

// store keeps the in-flight reservations in one ConfigMap (upstream
// kubemacpool's "waiting MACs" ConfigMap). Writes are group-committed:
// the reservations of every admission waiting at that moment go in one
// Update, so the API round trip is shared by concurrent admissions.
type store struct {
	c     client.Client
	key   types.NamespacedName
	owner string
	reqs  chan storeReq
	cm    *corev1.ConfigMap // last written or read copy; owned by run
}

type storeReq struct {
	put  []Reservation
	del  []Reservation // dropped only while the stored record is still this one
	done chan error    // nil: nobody waits
}

func newStore(c client.Client, key types.NamespacedName, fieldOwner string) *store {
	return &store{c: c, key: key, owner: fieldOwner, reqs: make(chan storeReq, 1024)}
}

// load reads the ConfigMap (creating it when absent with the range r, or
// with a random range when r is zero and none is stored) and gives the
// range to use and the stored reservations. A range r that differs from
// the stored one replaces it (the NetworkAddonsConfig changed).
func (s *store) load(ctx context.Context, r Range) (Range, []Reservation, error) {
	cm := &corev1.ConfigMap{}
	err := s.c.Get(ctx, s.key, cm)
	if apierrors.IsNotFound(err) {
		if r.IsZero() {
			if r, err = RandomRange(nil); err != nil {
				return Range{}, nil, err
			}
		}
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: s.key.Name, Namespace: s.key.Namespace,
			Annotations: rangeAnnotations(r)}}
		if err := s.c.Create(ctx, cm, client.FieldOwner(s.owner)); err != nil {
			return Range{}, nil, fmt.Errorf("ConfigMap %s: creating the MAC reservations: %w", s.key, err)
		}
		s.cm = cm
		return r, nil, nil
	}
	if err != nil {
		return Range{}, nil, fmt.Errorf("ConfigMap %s: reading the MAC reservations: %w", s.key, err)
	}
	stored, err := ParseRange(cm.Annotations[RangeStartAnnotation], cm.Annotations[RangeEndAnnotation])
	switch {
	case r.IsZero() && err != nil:
		return Range{}, nil, fmt.Errorf("ConfigMap %s: no usable range in its annotations and none configured: %w", s.key, err)
	case r.IsZero():
		r = stored
	}
	if r != stored {
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		for k, v := range rangeAnnotations(r) {
			cm.Annotations[k] = v
		}
		if err := s.c.Update(ctx, cm, client.FieldOwner(s.owner)); err != nil {
			return Range{}, nil, fmt.Errorf("ConfigMap %s: recording the MAC range %s: %w", s.key, r, err)
		}
	}
	s.cm = cm
	var out []Reservation
	for k, v := range cm.Data {
		m, err := ParseMAC(k)
		var rec record
		if err == nil {
			err = json.Unmarshal([]byte(v), &rec)
		}
		if err != nil {
			// Kept in the ConfigMap for a human to look at; never dropped.
			return Range{}, nil, fmt.Errorf("ConfigMap %s: data key %q: want a MAC reservation {\"owner\":…,\"since\":…}: %v", s.key, k, err)
		}
		out = append(out, Reservation{MAC: m, Owner: rec.Owner, Since: rec.Since})
	}
	return r, out, nil
}

func rangeAnnotations(r Range) map[string]string {
	return map[string]string{RangeStartAnnotation: r.Start.String(), RangeEndAnnotation: r.End.String()}
}

// persist records reservations and waits until they are stored.
func (s *store) persist(ctx context.Context, put []Reservation) error {
	done := make(chan error, 1)
	select {
	case s.reqs <- storeReq{put: put, done: done}:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// forget drops reservations from the ConfigMap without waiting. A
// reservation is dropped only while its record is unchanged, so that a
// newer reservation of the same MAC queued meanwhile is kept.
func (s *store) forget(res []Reservation) {
	if len(res) > 0 {
		s.reqs <- storeReq{del: res}
	}
}

// run serves persist and forget until ctx ends: it takes every request
// waiting, writes them in one Update and answers them all.
func (s *store) run(ctx context.Context) {
	for {
		var batch []storeReq
		select {
		case <-ctx.Done():
			return
		case r := <-s.reqs:
			batch = append(batch, r)
		}
	drain:
		for {
			select {
			case r := <-s.reqs:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		err := s.write(ctx, batch)
		for _, r := range batch {
			if r.done != nil {
				r.done <- err
			}
		}
	}
}

func (s *store) write(ctx context.Context, batch []storeReq) error {
	for attempt := 0; ; attempt++ {
		cm := s.cm.DeepCopy()
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		changed := false
		for _, r := range batch {
			for _, res := range r.del {
				var rec record
				if v, ok := cm.Data[res.MAC.key()]; ok && json.Unmarshal([]byte(v), &rec) == nil &&
					rec.Owner == res.Owner && rec.Since.Equal(res.Since) {
					delete(cm.Data, res.MAC.key())
					changed = true
				}
			}
			for _, res := range r.put {
				b, _ := json.Marshal(record{Owner: res.Owner, Since: res.Since.UTC()})
				cm.Data[res.MAC.key()] = string(b)
				changed = true
			}
		}
		if !changed {
			return nil
		}
		err := s.c.Update(ctx, cm, client.FieldOwner(s.owner))
		if err == nil {
			s.cm = cm
			return nil
		}
		if (!apierrors.IsConflict(err) && !apierrors.IsNotFound(err)) || attempt >= 5 {
			return fmt.Errorf("ConfigMap %s: storing MAC reservations: %w", s.key, err)
		}
		// Someone else wrote it (or deleted it): start again from the
		// stored copy; our own reservations are re-applied on top.
		fresh := &corev1.ConfigMap{}
		if gerr := s.c.Get(ctx, s.key, fresh); gerr != nil {
			if !apierrors.IsNotFound(gerr) {
				return fmt.Errorf("ConfigMap %s: re-reading MAC reservations: %w", s.key, gerr)
			}
			fresh = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: s.key.Name, Namespace: s.key.Namespace,
				Annotations: s.cm.Annotations}}
			if cerr := s.c.Create(ctx, fresh, client.FieldOwner(s.owner)); cerr != nil {
				return fmt.Errorf("ConfigMap %s: re-creating MAC reservations: %w", s.key, cerr)
			}
		}
		s.cm = fresh
	}
}

package synccontroller

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-dev/converge/api/v1alpha1"
)

func TestOwnWrites(t *testing.T) {
	s := types.NamespacedName{Namespace: "converge", Name: "local"}
	inv := &v1alpha1.Inventory{Entries: []v1alpha1.InventoryEntry{{ID: "hc", ResourceVersion: "12"}, {ID: "kv", ResourceVersion: "9"}}}
	upd := func(id, v string) ownEvent { return ownEvent{id: id, version: v} }
	del := func(id string) ownEvent { return ownEvent{id: id, deleted: true} }
	status := func(id, v string) ownEvent { return ownEvent{id: id, version: v, statusOnly: true} }
	type write struct{ id, version string }
	for _, tc := range []struct {
		name string
		// writes during the apply, events during it, and the events after.
		writes      []write
		during      []ownEvent
		inv         *v1alpha1.Inventory
		wantRequeue bool
		// wantStatusOnly: every foreign event held was status-only.
		wantStatusOnly bool
		after          []ownEvent
		wantEnqueued   []bool
	}{
		{name: "own spec patch and status write, held and late",
			writes: []write{{"hc", "11"}, {"hc", "12"}, {"kv", "9"}}, during: []ownEvent{upd("hc", "11")}, inv: inv,
			after: []ownEvent{upd("hc", "12"), upd("kv", "9")}, wantEnqueued: []bool{false, false}},
		{name: "someone else's write between converge's two",
			writes: []write{{"hc", "11"}, {"hc", "12"}}, during: []ownEvent{upd("hc", "11"), upd("hc", "10")}, inv: inv, wantRequeue: true},
		{name: "an operator's status write while converge applies",
			writes: []write{{"kv", "9"}}, during: []ownEvent{upd("kv", "9"), status("kv", "10")}, inv: inv, wantRequeue: true, wantStatusOnly: true},
		{name: "a status write and a spec change while converge applies",
			writes: []write{{"kv", "9"}}, during: []ownEvent{status("kv", "10"), upd("kv", "11")}, inv: inv, wantRequeue: true},
		{name: "a status write that is converge's own",
			writes: []write{{"kv", "9"}}, during: []ownEvent{status("kv", "9")}, inv: inv},
		{name: "failed apply: a held status write",
			writes: []write{{"kv", "9"}}, during: []ownEvent{status("kv", "10")}, wantRequeue: true, wantStatusOnly: true},
		{name: "drift after the apply",
			writes: []write{{"kv", "9"}}, inv: inv,
			after: []ownEvent{upd("kv", "13"), upd("other", "1")}, wantEnqueued: []bool{true, true}},
		{name: "deletion of an applied object is drift, of a pruned one is not",
			inv: inv, during: []ownEvent{del("pruned")},
			after: []ownEvent{del("kv"), del("pruned")}, wantEnqueued: []bool{true, false}},
		{name: "failed apply without an inventory and nothing held before",
			writes: []write{{"kv", "9"}},
			after:  []ownEvent{upd("hc", "12"), upd("kv", "9")}, wantEnqueued: []bool{true, false}},
		{name: "failed apply without an inventory: any held event requeues",
			writes: []write{{"kv", "9"}}, during: []ownEvent{upd("kv", "9")}, wantRequeue: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newOwnWrites()
			w.begin(s)
			for _, wr := range tc.writes {
				w.wrote(s, wr.id, wr.version)
			}
			for _, ev := range tc.during {
				if w.foreign(s, ev) {
					t.Errorf("event %+v during the apply enqueued at once, want held", ev)
				}
			}
			if got, statusOnly := w.end(s, tc.inv); got != tc.wantRequeue || statusOnly != tc.wantStatusOnly {
				t.Errorf("end = %v, status-only %v; want %v, %v", got, statusOnly, tc.wantRequeue, tc.wantStatusOnly)
			}
			for i, ev := range tc.after {
				if got := w.foreign(s, ev); got != tc.wantEnqueued[i] {
					t.Errorf("event %+v after the apply: foreign = %v, want %v", ev, got, tc.wantEnqueued[i])
				}
			}
			w.forget(s)
			if !w.foreign(s, upd("hc", "12")) {
				t.Error("after forget, an update was taken for the Sync's own")
			}
		})
	}
	t.Run("a failed apply keeps the last inventory's IDs and versions", func(t *testing.T) {
		w := newOwnWrites()
		w.begin(s)
		w.end(s, inv)
		w.begin(s)
		w.wrote(s, "kv", "10")
		w.end(s, nil)
		for _, c := range []struct {
			ev   ownEvent
			want bool
		}{{del("kv"), true}, {upd("hc", "12"), false}, {upd("kv", "10"), false}, {upd("kv", "11"), true}} {
			if got := w.foreign(s, c.ev); got != c.want {
				t.Errorf("event %+v after a failed apply: foreign = %v, want %v", c.ev, got, c.want)
			}
		}
	})
	t.Run("wrote outside an apply is ignored", func(t *testing.T) {
		w := newOwnWrites()
		w.wrote(s, "hc", "5")
		w.end(s, nil)
		if !w.foreign(s, upd("hc", "5")) {
			t.Error("a write reported outside begin/end was taken as own")
		}
	})
}

package synccontroller

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-dev/converge/api/v1alpha1"
	"github.com/converge-dev/converge/gitops/source"
)

func TestRefreshBlocked(t *testing.T) {
	const rev = "main@sha1:1111"
	sync := func(mutate func(*v1alpha1.Sync)) *v1alpha1.Sync {
		s := &v1alpha1.Sync{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
		s.Status.ObservedGeneration = 2
		s.Status.LastAttemptedRevision = rev
		if mutate != nil {
			mutate(s)
		}
		return s
	}
	last := settledSync{generation: 2, artifact: source.Artifact{Revision: rev}, at: time.Now().Add(-time.Minute)}
	for _, tc := range []struct {
		name     string
		s        *v1alpha1.Sync
		last     settledSync
		ok       bool
		interval time.Duration
		want     string // a word of the reason; "" when it may refresh
	}{
		{"settled, nothing else", sync(nil), last, true, time.Hour, ""},
		{"never settled", sync(nil), last, false, time.Hour, "did not apply every stage"},
		{"spec changed", sync(func(s *v1alpha1.Sync) { s.Generation = 3 }), last, true, time.Hour, "spec changed"},
		{"generation not observed yet", sync(func(s *v1alpha1.Sync) { s.Status.ObservedGeneration = 1 }), last, true, time.Hour, "spec changed"},
		{"reconcile requested", sync(func(s *v1alpha1.Sync) {
			s.Annotations = map[string]string{v1alpha1.ReconcileRequestAnnotation: "now"}
		}), last, true, time.Hour, "requested"},
		{"request already handled", sync(func(s *v1alpha1.Sync) {
			s.Annotations = map[string]string{v1alpha1.ReconcileRequestAnnotation: "then"}
			s.Status.LastHandledReconcileAt = "then"
		}), last, true, time.Hour, ""},
		{"another revision attempted since", sync(func(s *v1alpha1.Sync) { s.Status.LastAttemptedRevision = "main@sha1:2222" }), last, true, time.Hour, "another revision"},
		{"interval come round", sync(nil), last, true, 30 * time.Second, "interval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := refreshBlocked(tc.s, tc.last, tc.ok, tc.interval)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("refreshBlocked = %q, want %q", got, tc.want)
			}
		})
	}
}

package reconciler

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestRetryNoMatch(t *testing.T) {
	noMatch := &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "kubevirt.io", Kind: "KubeVirt"}, SearchedVersions: []string{"v1"}}
	other := errors.New("connection refused")
	// results are what send returns on each call; the last repeats.
	for _, tc := range []struct {
		name      string
		wait      time.Duration
		results   []error
		wantCalls int
		wantErr   error
	}{
		{"success at once", time.Second, []error{nil}, 1, nil},
		{"other error is not retried", time.Second, []error{other}, 1, other},
		{"kind served after two reloads", time.Second, []error{noMatch, noMatch, nil}, 3, nil},
		{"no-match then another error", time.Second, []error{noMatch, other}, 2, other},
		{"no wait: one try", 0, []error{noMatch, nil}, 1, noMatch},
		{"kind never served: fails after the wait", 50 * time.Millisecond, []error{noMatch}, -1, noMatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := retryNoMatch(context.Background(), tc.wait, 5*time.Millisecond, func() error {
				r := tc.results[min(calls, len(tc.results)-1)]
				calls++
				return r
			})
			if !errors.Is(err, tc.wantErr) && err != tc.wantErr {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantCalls >= 0 && calls != tc.wantCalls {
				t.Fatalf("%d calls, want %d", calls, tc.wantCalls)
			}
			if tc.wantCalls < 0 && calls < 2 {
				t.Fatalf("%d calls: a kind never served was not retried during the wait", calls)
			}
		})
	}
	t.Run("context ends the wait", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		err := retryNoMatch(ctx, time.Hour, 5*time.Millisecond, func() error {
			calls++
			if calls == 2 {
				cancel()
			}
			return noMatch
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	})
}

package cluster_test

import (
	"testing"

	"github.com/converge-dev/converge/internal/e2e/cluster"
)

// TestMain shares one cluster between the tests; the shared fixtures'
// cleanups (atEnd) run before it stops. Go runs the tests in the order of
// their files' names: those of then_*_test.go disturb what the others
// check once (a pod deleted, a crash loop, converge-controller restarted
// when the native SSP goes, or by a switch to external mode, last of
// all) and run last.
func TestMain(m *testing.M) {
	cluster.Main(m, func() {
		for i := len(atEnd) - 1; i >= 0; i-- {
			atEnd[i]()
		}
	})
}

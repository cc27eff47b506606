package cluster_test

import (
	"testing"

	"github.com/converge-dev/converge/internal/e2e/cluster"
)

// TestMain shares one cluster between the tests; the shared fixtures'
// cleanups (atEnd) run before it stops.
func TestMain(m *testing.M) {
	cluster.Main(m, func() {
		for i := len(atEnd) - 1; i >= 0; i-- {
			atEnd[i]()
		}
	})
}

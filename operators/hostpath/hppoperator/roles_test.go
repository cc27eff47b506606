package hppoperator_test

import (
	"testing"

	"github.com/converge-dev/converge/internal/testing/rolestest"
)

// TestRoles runs the HostPathProvisioner roles cases of testdata/roles/hpp:
// what the operator derives from a HostPathProvisioner CR, applied or
// refused.
func TestRoles(t *testing.T) { rolestest.Run(t, "../../../testdata/roles/hpp") }

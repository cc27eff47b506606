package cdioperator_test

import (
	"testing"

	"github.com/converge-dev/converge/internal/testing/rolestest"
)

// TestRoles runs the CDI roles cases of testdata/roles/cdi: what the
// operator derives from a CDI CR and its inputs, applied or refused.
func TestRoles(t *testing.T) { rolestest.Run(t, "../../../testdata/roles/cdi") }

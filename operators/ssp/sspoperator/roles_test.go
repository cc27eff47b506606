package sspoperator_test

import (
	"testing"

	"github.com/converge-dev/converge/internal/testing/rolestest"
)

// TestRoles runs the SSP roles cases of testdata/roles/ssp: what the
// operator derives from an SSP CR (the golden images namespace, its RBAC
// and the DataImportCrons), applied or refused.
func TestRoles(t *testing.T) { rolestest.Run(t, "../../../testdata/roles/ssp") }

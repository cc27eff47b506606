//go:build tools

package deps

import (
	_ "cuelang.org/go/cmd/cue"
	_ "cuelang.org/go/cue/cuecontext"
	_ "cuelang.org/go/encoding/openapi"
	_ "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	_ "github.com/fluxcd/pkg/ssa"
	_ "github.com/go-git/go-git/v5"
	_ "github.com/rogpeppe/go-internal/testscript"
	_ "github.com/spf13/cobra"
	_ "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Command kubectl is the upstream kubectl, built from k8s.io/kubectl at the
// version pinned in ../go.mod (as k8s.io/kubernetes cmd/kubectl). make demo
// uses it for what a user does by hand: a change to a converge-owned
// field, a pod deleted.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
	os.Exit(0)
}

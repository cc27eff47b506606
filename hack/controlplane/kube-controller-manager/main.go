// Command kube-controller-manager is the upstream kube-controller-manager,
// built from k8s.io/kubernetes at the version pinned in ../go.mod. Tests
// start it through internal/testing/controlplane.StartControllerManager with only the
// controllers they need (for example the PersistentVolume binder).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}

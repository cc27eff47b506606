// Command kubelet is the upstream kubelet, built from k8s.io/kubernetes at
// the version pinned in ../go.mod. internal/testing/cluster runs it (with
// containerd from Debian) as the node of the local single-node cluster.
package main

import (
	"context"
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	os.Exit(cli.Run(app.NewKubeletCommand(context.Background())))
}

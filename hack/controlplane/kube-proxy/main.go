// Command kube-proxy is the upstream kube-proxy, built from
// k8s.io/kubernetes at the version pinned in ../go.mod (as its
// cmd/kube-proxy). internal/testing/cluster runs it in nftables mode on
// the node of the local single-node cluster, so that Services' ClusterIPs
// lead to their endpoints as on any cluster.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-proxy/app"
)

func main() {
	os.Exit(cli.Run(app.NewProxyCommand()))
}

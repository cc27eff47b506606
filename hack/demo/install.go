package main

import (
	"context"
	"fmt"
	"time"
)

// install runs `converge install --sync-url … --sync-path …` against the
// cluster as a user does: the Sync CRD, converge-controller's namespace,
// RBAC and Deployment (of the image the kubelet pulls from the demo registry), waiting
// for it to be ready, and a Sync of the config repository. It sets
// d.installed to when the command started.
func (d *demo) install(ctx context.Context) error {
	say("installing converge as a user does, with a Sync of the config repository")
	fmt.Printf("\n$ export KUBECONFIG=%s\n", d.env.Cluster.Kubeconfig)
	note("the cluster's admin kubeconfig; every `converge` below is the real CLI (%s)", d.env.CLI)
	if err := d.show(ctx, "version"); err != nil {
		return err
	}
	d.installed = time.Now()
	took, err := d.converge(ctx, "install", "--sync-url", d.url, "--sync-path", configPath)
	if err != nil {
		return err
	}
	d.record("converge install (to converge-controller ready)", took)
	note("converge-controller (image ghcr.io/converge-dev/converge-controller:%s, built by this demo and pulled by the kubelet from the demo's registry mirror of ghcr.io) is running in the cluster after %s;", demoVersion, round(took))
	note("it fetches %s from the Git server, applies it, and runs the native operators of the operand CRs", d.url)
	return nil
}

// Command cluster starts, stops and reports the local single-node
// Kubernetes cluster of internal/testing/cluster (`make cluster`, `make
// cluster-stop`, `make cluster-status`):
//
//	cluster start  [-dir DIR] [-bin DIR]   start it and leave it running
//	cluster stop                           stop it and clean the host
//	cluster status                         print what runs and the Node
//
// The cluster's state (certificates, kubeconfig, etcd, containerd's root,
// logs) is in DIR (default bin/cluster); the logs stay there after stop
// until the next start. Run as root.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/converge-dev/converge/internal/testing/cluster"
	"github.com/converge-dev/converge/internal/testing/controlplane"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "start":
		err = start(os.Args[2:])
	case "stop":
		err = cluster.StopRunning(os.Stderr)
		if err == nil {
			fmt.Println("cluster stopped; the host is clean")
		}
	case "status":
		err = status()
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: cluster start [-dir DIR] [-bin DIR] | stop | status")
	os.Exit(2)
}

func start(args []string) error {
	bin, err := controlplane.BinDir()
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("start", flag.ExitOnError)
	dir := fs.String("dir", filepath.Join(bin, "cluster"), "the cluster's work directory (state and logs)")
	binDir := fs.String("bin", bin, "directory holding etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and cni/")
	timeout := fs.Duration("timeout", 3*time.Minute, "give up starting after this long")
	_ = fs.Parse(args)
	opts := cluster.DefaultOptions()
	opts.Dir, opts.BinDir, opts.Timeout = *dir, *binDir, *timeout
	opts.Detach, opts.KeepLogs = true, true
	opts.Progress = os.Stderr
	c, err := cluster.Start(context.Background(), opts)
	if err != nil {
		return err
	}
	fmt.Printf(`cluster up: node %s Ready after %.1fs, default ServiceAccount after %.1fs
  kubeconfig:  %s
  use it:      export KUBECONFIG=%s
  apiserver:   https://%s (from the host and from pods)
  import:      ctr --address %s -n k8s.io images import IMAGE.tar
  logs:        %s
  stop it:     make cluster-stop
`, c.NodeName, c.Timings.NodeReady.Seconds(), c.Timings.DefaultServiceAccount.Seconds(),
		c.Kubeconfig, c.Kubeconfig, c.APIServerAddress, cluster.ContainerdAddress, filepath.Join(c.Dir, "logs"))
	return nil
}

func status() error {
	s, err := cluster.CurrentStatus()
	if err != nil {
		return err
	}
	if s.Owner == nil {
		fmt.Println("no cluster recorded on this machine")
		return nil
	}
	fmt.Printf("cluster started by %s\n", s.Owner)
	for _, p := range s.Procs {
		state := "running"
		if !p.Running {
			state = "NOT RUNNING"
		}
		fmt.Printf("  %-24s pid %-8d %s\n", p.Name, p.PID, state)
	}
	fmt.Printf("kubeconfig: %s\n", s.Kubeconfig)
	if !s.Running() {
		return fmt.Errorf("the cluster is not (fully) running: `make cluster-stop` cleans it up")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		return err
	}
	cfg.Timeout = 5 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	nodes, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	for _, n := range nodes.Items {
		ready := "Unknown"
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				ready = string(c.Status)
			}
		}
		fmt.Printf("node %s Ready=%s (%s)\n", n.Name, ready, n.Status.NodeInfo.KubeletVersion)
	}
	pods, err := cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	fmt.Printf("%d pods\n", len(pods.Items))
	return nil
}

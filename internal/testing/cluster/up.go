package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/tools/clientcmd"
)

// up starts the components: etcd then kube-apiserver then the controller
// manager and the scheduler, alongside containerd then the kubelet, and
// the sandbox image built and imported meanwhile; then it waits for the
// Node to be Ready and the default ServiceAccount to exist.
func (c *Cluster) up(ctx context.Context) error {
	st := c.st
	p := newPKIFiles(filepath.Join(st.Dir, "pki"))
	server := "https://" + c.APIServerAddress
	if err := writePKI(p, st.NodeName, server); err != nil {
		return fmt.Errorf("cluster: PKI: %w", err)
	}
	c.Kubeconfig = p.adminConfig
	cfg, err := clientcmd.BuildConfigFromFlags("", p.adminConfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	c.Config = cfg
	pn := podNetworkDirs(st.Dir, st.BinDir)
	if err := os.MkdirAll(pn.ConfDir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(pn.ConfDir, "10-"+NetworkName+".conflist"), []byte(cniConflist(pn.LeaseDir)), 0o644); err != nil {
		return err
	}
	containerdConf := filepath.Join(st.Dir, "containerd.toml")
	if err := writeContainerdConfig(containerdConf, st.Dir, pn.BinDir, pn.ConfDir); err != nil {
		return err
	}
	kp := kubeletPaths{config: filepath.Join(st.Dir, "kubelet.json"), podLogs: filepath.Join(st.Dir, "pod-logs"), volumePlugins: filepath.Join(st.Dir, "volume-plugins")}
	if err := writeKubeletConfig(kp, p); err != nil {
		return err
	}
	if err := os.MkdirAll(st.KubeletRootDir, 0o750); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(st.KubeletRootDir, kubeletRootMarker), []byte(st.Dir+"\n"), 0o644); err != nil {
		return err
	}
	if err := addNodeIP(); err != nil {
		return fmt.Errorf("cluster: node address: %w", err)
	}
	if err := shareRootMounts(); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	c.progress("PKI, configuration, node address %s/32 on lo and shared mount propagation ready", NodeIP)

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return c.upControlPlane(gctx, p) })
	containerdUp := make(chan struct{})
	g.Go(func() error {
		r, err := c.launch("containerd", []string{"containerd", "--config", containerdConf})
		if err != nil {
			return err
		}
		if err := waitContainerd(gctx, r); err != nil {
			return err
		}
		c.Timings.ContainerdReady = time.Since(c.start)
		c.progress("containerd answers on %s", containerdSocket)
		close(containerdUp)
		if _, err := c.launch("kubelet", kubeletArgs(st.BinDir, kp, p, st.KubeletRootDir, st.NodeName)); err != nil {
			return err
		}
		c.progress("kubelet started")
		return nil
	})
	g.Go(func() error {
		archive := filepath.Join(st.Dir, "images", "pause.tar")
		if err := BuildPauseImage(gctx, archive); err != nil {
			return fmt.Errorf("cluster: sandbox image: %w", err)
		}
		select {
		case <-containerdUp:
		case <-gctx.Done():
			return gctx.Err()
		}
		if err := importImage(gctx, archive); err != nil {
			return err
		}
		c.Timings.ImagesImported = time.Since(c.start)
		c.progress("sandbox image %s built and imported", PauseImage)
		return nil
	})
	if err := g.Wait(); err != nil {
		return err
	}
	if err := c.waitNodeReady(ctx); err != nil {
		return err
	}
	c.Timings.NodeReady = time.Since(c.start)
	c.progress("node %s Ready", st.NodeName)
	if err := c.waitDefaultServiceAccount(ctx); err != nil {
		return err
	}
	c.Timings.DefaultServiceAccount = time.Since(c.start)
	c.progress("default ServiceAccount exists: cluster up, kubeconfig %s", c.Kubeconfig)
	return nil
}

// upControlPlane starts etcd, waits for its health, starts kube-apiserver,
// waits for /readyz, then starts the controller manager and the scheduler.
func (c *Cluster) upControlPlane(ctx context.Context, p pkiFiles) error {
	st := c.st
	etcd, err := c.launch("etcd", etcdArgs(st.BinDir, st.Dir))
	if err != nil {
		return err
	}
	if err := waitHTTP(ctx, etcd, "http://"+hostPort(EtcdPort)+"/health", nil); err != nil {
		return err
	}
	c.Timings.EtcdHealthy = time.Since(c.start)
	c.progress("etcd healthy on %s", hostPort(EtcdPort))
	apiserver, err := c.launch("kube-apiserver", apiserverArgs(st.BinDir, st.Dir, p))
	if err != nil {
		return err
	}
	if err := waitHTTP(ctx, apiserver, "https://"+c.APIServerAddress+"/readyz", c.Config); err != nil {
		return err
	}
	c.Timings.APIServerReady = time.Since(c.start)
	c.progress("kube-apiserver ready on %s", c.APIServerAddress)
	if _, err := c.launch("kube-controller-manager", controllerManagerArgs(st.BinDir, st.Dir, p)); err != nil {
		return err
	}
	if _, err := c.launch("kube-scheduler", schedulerArgs(st.BinDir, st.Dir, p)); err != nil {
		return err
	}
	c.progress("kube-controller-manager and kube-scheduler started")
	proxy, err := c.launch("kube-proxy", proxyArgs(st.BinDir, st.NodeName, p))
	if err != nil {
		return err
	}
	// Healthy once it has programmed the Services (nftables) it found.
	if err := waitHTTP(ctx, proxy, "http://"+hostPort(ProxyHealthzPort)+"/livez", nil); err != nil {
		return err
	}
	c.progress("kube-proxy routing the service network %s", ServiceCIDR)
	return nil
}

// processExited fails with the log tail of the first component that has
// exited, if any.
func (c *Cluster) processExited() error {
	c.stMu.Lock()
	defer c.stMu.Unlock()
	for name, r := range c.procs {
		if done, err := r.exited(); done {
			return fmt.Errorf("%s exited (%v); log %s:\n%s", name, err, r.log, tail(r.log, 3000))
		}
	}
	return nil
}

package cluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// hostPort joins NodeIP and port.
func hostPort(port int) string { return NodeIP + ":" + strconv.Itoa(port) }

// etcdArgs runs etcd on NodeIP with its data under dir, without fsync
// (the data dies with the cluster).
func etcdArgs(bin, dir string) []string {
	client := "http://" + hostPort(EtcdPort)
	peer := "http://" + hostPort(etcdPeerPort)
	return []string{filepath.Join(bin, "etcd"),
		"--name=converge-cluster",
		"--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=converge-cluster=" + peer,
		"--unsafe-no-fsync",
		"--log-level=warn",
	}
}

// apiserverArgs runs kube-apiserver on NodeIP:APIServerPort with Node and
// RBAC authorization, NodeRestriction, privileged pods allowed, the
// service network ServiceCIDR (kube-proxy routes its ClusterIPs), endpoint
// routing to webhooks and aggregated APIs (the apiserver dials their pods
// directly rather than through a ClusterIP), and the aggregation layer's
// front proxy as kubeadm configures it (--requestheader-*,
// --proxy-client-*), so aggregated APIs authenticate the users it proxies.
func apiserverArgs(bin, dir string, p pkiFiles) []string {
	return []string{filepath.Join(bin, "kube-apiserver"),
		"--etcd-servers=http://" + hostPort(EtcdPort),
		"--bind-address=" + NodeIP, "--advertise-address=" + NodeIP,
		"--secure-port=" + strconv.Itoa(APIServerPort),
		"--cert-dir=" + filepath.Join(dir, "apiserver"),
		"--tls-cert-file=" + p.apiserverCert, "--tls-private-key-file=" + p.apiserverKey,
		"--client-ca-file=" + p.caCert,
		"--kubelet-client-certificate=" + p.kubeletClientCert, "--kubelet-client-key=" + p.kubeletClientKey,
		"--kubelet-certificate-authority=" + p.caCert,
		"--kubelet-preferred-address-types=InternalIP",
		"--service-account-key-file=" + p.saPub,
		"--service-account-signing-key-file=" + p.saKey,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--enable-aggregator-routing=true",
		"--requestheader-client-ca-file=" + p.frontProxyCACert,
		"--requestheader-allowed-names=" + FrontProxyUser,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + p.frontProxyClientCert, "--proxy-client-key-file=" + p.frontProxyClientKey,
		"--profiling=false",
	}
}

// controllerManagerArgs runs every default controller, signing CSRs and
// service account tokens with the cluster's keys, without leader
// election, with the flexvolume directory under the work directory (it
// creates the default one under /usr/libexec otherwise). The controllers
// run under the controller manager's own identity, which is in
// system:masters, not each as its own service account
// (--use-service-account-credentials=false): creating a service account
// and a token per controller delayed the default ServiceAccount, and so
// Start, by 5-8 s (measured: 9.2/13.1 s against 4.4/5.4 s to the default
// ServiceAccount, alternating runs).
func controllerManagerArgs(bin, dir string, p pkiFiles) []string {
	return []string{filepath.Join(bin, "kube-controller-manager"),
		"--kubeconfig=" + p.controllerManagerConfig,
		"--authentication-kubeconfig=" + p.controllerManagerConfig,
		"--authorization-kubeconfig=" + p.controllerManagerConfig,
		"--bind-address=" + NodeIP, "--secure-port=" + strconv.Itoa(ControllerManagerPort),
		"--cert-dir=" + filepath.Join(dir, "controller-manager"),
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--root-ca-file=" + p.caCert,
		"--service-account-private-key-file=" + p.saKey,
		"--cluster-signing-cert-file=" + p.caCert, "--cluster-signing-key-file=" + p.caKey,
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--flex-volume-plugin-dir=" + filepath.Join(dir, "volume-plugins"),
		"--profiling=false",
	}
}

// schedulerArgs runs kube-scheduler without leader election.
func schedulerArgs(bin, dir string, p pkiFiles) []string {
	return []string{filepath.Join(bin, "kube-scheduler"),
		"--kubeconfig=" + p.schedulerConfig,
		"--authentication-kubeconfig=" + p.schedulerConfig,
		"--authorization-kubeconfig=" + p.schedulerConfig,
		"--bind-address=" + NodeIP, "--secure-port=" + strconv.Itoa(SchedulerPort),
		"--cert-dir=" + filepath.Join(dir, "scheduler"),
		"--leader-elect=false",
		"--profiling=false",
	}
}

// proxyArgs runs kube-proxy in nftables mode (Debian's nft is all it
// needs; there is no iptables here) as system:kube-proxy, for the Node
// nodeName, masquerading what leaves PodCIDR for a ClusterIP, and leaves
// the conntrack sysctls as they are (the sandbox may not set them).
func proxyArgs(bin, nodeName string, p pkiFiles) []string {
	return []string{filepath.Join(bin, "kube-proxy"),
		"--kubeconfig=" + p.proxyConfig,
		"--proxy-mode=nftables",
		"--hostname-override=" + nodeName,
		"--cluster-cidr=" + PodCIDR,
		"--bind-address=" + NodeIP,
		"--metrics-bind-address=" + hostPort(ProxyMetricsPort),
		"--healthz-bind-address=" + hostPort(ProxyHealthzPort),
		"--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0",
		"--conntrack-tcp-timeout-close-wait=0",
		"--profiling=false",
	}
}

// kubeletPaths are the files of the kubelet's configuration.
type kubeletPaths struct {
	config, podLogs, volumePlugins string
}

// writeKubeletConfig writes the KubeletConfiguration (as JSON, which the
// kubelet reads as YAML): serving on NodeIP with the cluster's
// certificate, x509 and webhook authentication, webhook authorization,
// containerd as the runtime, cgroupfs, cgroup v1 allowed (failCgroupV1
// false: this host is on cgroup v1), swap allowed, pod logs and the
// flexvolume directory under the work directory, and image garbage
// collection and disk eviction off (a shared machine's disk use must not
// evict the cluster's pods or delete the images imported into it).
func writeKubeletConfig(kp kubeletPaths, p pkiFiles) error {
	cfg := map[string]any{
		"apiVersion":                  "kubelet.config.k8s.io/v1beta1",
		"kind":                        "KubeletConfiguration",
		"address":                     NodeIP,
		"port":                        KubeletPort,
		"readOnlyPort":                0,
		"healthzBindAddress":          NodeIP,
		"healthzPort":                 KubeletHealthzPort,
		"tlsCertFile":                 p.kubeletServingCert,
		"tlsPrivateKeyFile":           p.kubeletServingKey,
		"authentication":              map[string]any{"anonymous": map[string]any{"enabled": false}, "webhook": map[string]any{"enabled": true}, "x509": map[string]any{"clientCAFile": p.caCert}},
		"authorization":               map[string]any{"mode": "Webhook"},
		"containerRuntimeEndpoint":    "unix://" + containerdSocket,
		"cgroupDriver":                "cgroupfs",
		"failCgroupV1":                false,
		"failSwapOn":                  false,
		"podLogsDir":                  kp.podLogs,
		"volumePluginDir":             kp.volumePlugins,
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"evictionHard":                map[string]string{"memory.available": "1Mi", "nodefs.available": "0%", "imagefs.available": "0%"},
		"rotateCertificates":          false,
		"serverTLSBootstrap":          false,
		"nodeStatusReportFrequency":   "10s",
		"registerNode":                true,
		"resolvConf":                  "/etc/resolv.conf",
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(kp.config, b, 0o644); err != nil {
		return fmt.Errorf("kubelet config: %w", err)
	}
	return nil
}

// kubeletArgs runs the kubelet with its configuration, root directory and
// the node's name and IP.
func kubeletArgs(bin string, kp kubeletPaths, p pkiFiles, rootDir, nodeName string) []string {
	return []string{filepath.Join(bin, "kubelet"),
		"--config=" + kp.config,
		"--kubeconfig=" + p.kubeletConfig,
		"--root-dir=" + rootDir,
		"--cert-dir=" + filepath.Join(rootDir, "pki"),
		"--hostname-override=" + nodeName,
		"--node-ip=" + NodeIP,
	}
}

// Package cluster starts and stops a real single-node Kubernetes cluster
// on this machine, for tests, `make cluster`, the demo and the benchmarks:
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet
// and kube-proxy (nftables mode) v1.37.1 (built from Go modules into bin/ by hack/controlplane/build.sh),
// containerd and runc from Debian, and a CNI bridge as the pod network
// (the bridge, host-local and loopback plugins of bin/cni). It follows the
// recipe of ../shared/notes/realcluster.md; the PKI is made in Go
// (crypto/x509), the sandbox (pause) image is Kubernetes' own pause,
// compiled from build/pause/linux/pause.c of the k8s.io/kubernetes module
// the kubelet is built from, packed with go-containerregistry and
// imported into containerd at every start (BuildPauseImage).
//
// One cluster runs per machine: it takes the fixed node IP NodeIP (a /32
// on lo, since the kubelet and the apiserver refuse loopback addresses),
// fixed ports on it, and a lock (LockDir). Start fails, naming the holder,
// while another cluster runs; it cleans up what a previous run that died
// left behind (processes by recorded PID, mounts, the address, the bridge,
// cgroups, sysctls) before it starts.
//
// # Addresses
//
// Every listener is on NodeIP: kube-apiserver on NodeIP:443, etcd on
// NodeIP:2379, the controller manager, the scheduler and the kubelet on
// their usual ports, kube-proxy's metrics and health on 10249 and 10256.
// kube-proxy (nftables mode, Debian's nft) routes the service network
// ServiceCIDR: the `kubernetes` Service's ClusterIP KubernetesServiceIP
// (in the apiserver's certificate) leads to NodeIP:443, so the
// KUBERNETES_SERVICE_HOST/PORT the kubelet gives every pod reach the
// apiserver from the pod network and the host network alike, and any
// Service's ClusterIP leads to its endpoints. There is no cluster DNS.
// The apiserver reaches webhooks and aggregated APIs through their
// endpoints (--enable-aggregator-routing).
//
// # Host paths
//
// State lives in the cluster's work directory (Options.Dir): certificates,
// the admin kubeconfig, etcd's data, containerd's root and configuration,
// the CNI configuration, host-local's leases, pod logs, the sandbox image
// and every process log (logs/). What the daemons insist on outside it,
// all undone by Stop (and by the next Start after a crash):
//
//   - LockDir (/run/converge-cluster): the lock file (which stays, empty),
//     the owner record, and containerd's state directory (its socket, shim
//     and runc state, and the pods' network namespaces, with
//     netns_mounts_under_state_dir).
//   - /run/containerd/s: containerd 1.6 puts its shims' sockets there
//     whatever its state directory; the sockets of the cluster's sandboxes
//     are removed, and the directories when Start created them and they
//     are empty.
//   - Options.KubeletRootDir (default /var/lib/kubelet, where upstream
//     DaemonSets such as CSI node plugins expect it): the kubelet
//     bind-mounts it onto itself (rshared) and mounts pod volumes below
//     it. Start marks it (.converge-cluster) and refuses a non-empty
//     directory without the mark; Stop unmounts and empties it, and
//     removes it when Start created it.
//   - /var/log/containers: the kubelet's links to container logs; the
//     links into the work directory are removed, the directory when Start
//     created it and it is empty.
//   - /var/lib/cni/results: the result cache of containerd's CNI library;
//     the files of the cluster's network and of containerd's loopback
//     network for the cluster's sandboxes are removed, the directories
//     when Start created them and they are empty.
//   - /usr/libexec/kubernetes/kubelet-plugins/volume/exec: the flexvolume
//     directory; the kubelet and the controller manager are pointed into
//     the work directory instead, and it is removed if created anyway.
//   - /sys/fs/cgroup/<hierarchy>/kubepods: the kubelet's pod cgroups
//     (cgroupfs driver; cgroup v1 on these hosts): the processes in them
//     are killed (pods outlive their killed shims) and the cgroups
//     removed.
//   - The address NodeIP/32 on lo and the pod bridge BridgeName (the pods'
//     veth pairs go with their network namespaces).
//   - sysctls: net.ipv4.ip_forward (the bridge plugin turns it on) and the
//     kernel tunables the kubelet sets at start (vm.overcommit_memory,
//     vm.panic_on_oom, kernel.panic, kernel.panic_on_oops,
//     kernel.keys.root_maxkeys, kernel.keys.root_maxbytes) get back the
//     values Start found.
//   - iptables: the KUBE-* chains the kubelet adds when an iptables binary
//     exists are deleted (none here: Debian's containerd does not pull
//     iptables in).
//   - nftables: kube-proxy's tables ("kube-proxy" in the ip and ip6
//     families) are deleted.
//
// Not undone: kernel modules containerd and the bridge plugin may load
// (overlay, bridge, veth; built into these machines' kernel), and the
// empty lock file in LockDir.
//
// Processes are killed by recorded PID (checked against their start time),
// then any etcd, kube-*, kubelet, containerd, shim, runc or ctr process
// whose command line names the work directory or LockDir. Start refuses
// to run beside a kubelet that is not one of this package's.
package cluster

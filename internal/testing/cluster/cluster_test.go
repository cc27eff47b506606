package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-dev/converge/internal/testing/controlplane"
)

// crashEnv makes TestCrashedRunHelper start a cluster, run a pod and
// exit without stopping anything, as a test process that dies does.
const crashEnv = "CONVERGE_CLUSTER_CRASH_HELPER"

// secondEnv makes TestSecondStartHelper try to start a second cluster
// (without waiting) and print the error.
const secondEnv = "CONVERGE_CLUSTER_SECOND_HELPER"

// echoImage is the test image built from ./echoserver.
const echoImage = "localhost/converge/echoserver:test"

// hostSnapshot is what the cluster may change on the host.
type hostSnapshot struct {
	sysctls map[string]string
	exists  map[string]bool
}

// hostPaths are host paths outside the work directory that only a
// kubelet creates here (the package doc lists them; /var/lib/cni and
// /run/containerd are checked by content, since other CNI users and
// containerds share them).
var hostPaths = []string{DefaultKubeletRootDir, "/var/log/containers", "/usr/libexec/kubernetes"}

func snapshot(t *testing.T) hostSnapshot {
	t.Helper()
	s, err := readSysctls()
	if err != nil {
		t.Fatal(err)
	}
	h := hostSnapshot{sysctls: s, exists: map[string]bool{}}
	for _, p := range hostPaths {
		_, err := os.Lstat(p)
		h.exists[p] = err == nil
	}
	return h
}

// TestCluster starts the cluster after a run that crashed (a helper
// process that started one, ran a pod and exited without stopping),
// checks that the start cleaned that run's leftovers, runs a pod on the
// pod network (Ready, reached from the host at its IP, reaching the
// apiserver through the in-cluster config) and a privileged hostNetwork
// DaemonSet pod, checks that a second Start fails naming the holder, and
// that Stop leaves no process, mount, address, bridge, veth, cgroup,
// sysctl or host directory behind.
func TestCluster(t *testing.T) {
	bin := requireCluster(t)
	// The host as it is with no cluster: the snapshot is taken holding
	// the machine's cluster lock, so that another test package's cluster
	// (go test ./... runs packages in parallel) is not in it.
	lock, err := acquireLock(20 * time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	before := snapshot(t)
	lock.release()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// A run that dies: its pod's shim, containers, mounts and cgroups,
	// and the node address, stay behind.
	crash := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrashedRunHelper$", "-test.v")
	crash.Env = append(os.Environ(), crashEnv+"=1", "KUBEBUILDER_ASSETS="+bin)
	out, err := crash.CombinedOutput()
	if !strings.Contains(string(out), "crashing now") {
		t.Fatalf("crash helper did not get to its crash (%v):\n%s", err, out)
	}
	shims := procsMentioning(LockDir)
	mounted, _ := mountsUnder(LockDir)
	if len(shims) == 0 || len(mounted) == 0 || len(kubepodsCgroups()) == 0 || !nodeIPPresent() {
		t.Fatalf("the crashed run left no shim (%v), mount under %s (%v), kubepods cgroup or node address: nothing to clean up", shims, LockDir, mounted)
	}

	c := StartForTest(t)
	for _, p := range shims {
		if p.alive() {
			t.Errorf("the crashed run's %s (pid %d) still runs after Start", p.Name, p.PID)
		}
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("start: etcd %s, apiserver %s, containerd %s, node Ready %s, default ServiceAccount %s (cleanup of the crashed run %s)",
		c.Timings.EtcdHealthy, c.Timings.APIServerReady, c.Timings.ContainerdReady, c.Timings.NodeReady, c.Timings.DefaultServiceAccount, c.Timings.Cleanup)

	t.Run("second Start fails naming the holder", func(t *testing.T) {
		o := DefaultOptions()
		o.BinDir = bin
		_, err := Start(ctx, o)
		if !errors.Is(err, ErrRunning) || !strings.Contains(err.Error(), "this process started it (work directory "+c.Dir+")") {
			t.Errorf("second Start in this process: %v; want ErrRunning saying this process started it in %s", err, c.Dir)
		}
		other := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestSecondStartHelper$", "-test.v")
		other.Env = append(os.Environ(), secondEnv+"=1", "KUBEBUILDER_ASSETS="+bin)
		out, _ := other.CombinedOutput()
		for _, want := range []string{ErrRunning.Error(), "held by process " + strconv.Itoa(os.Getpid()), "work directory " + c.Dir} {
			if !strings.Contains(string(out), want) {
				t.Errorf("Start in another process: want %q in its error:\n%s", want, out)
			}
		}
	})

	archive := filepath.Join(t.TempDir(), "echoserver.tar")
	if err := BuildGoImage(ctx, "./internal/testing/cluster/echoserver", echoImage, archive); err != nil {
		t.Fatal(err)
	}
	if err := c.ImportImage(ctx, archive); err != nil {
		t.Fatal(err)
	}

	t.Run("workloads", func(t *testing.T) {
		t.Run("pod on the pod network", func(t *testing.T) {
			t.Parallel()
			testBridgePod(ctx, t, cs)
		})
		t.Run("privileged hostNetwork DaemonSet", func(t *testing.T) {
			t.Parallel()
			testHostNetworkDaemonSet(ctx, t, cs)
		})
	})

	veths := bridgePorts()
	if len(veths) == 0 {
		t.Errorf("no veth on bridge %s while a pod runs on it", BridgeName)
	}
	sandboxes := sandboxIDs(c.Dir)
	if len(sandboxes) < 2 {
		t.Errorf("containerd's root lists sandboxes %v, want at least the two pods'", sandboxes)
	}
	for _, id := range sandboxes {
		if fi, err := os.Lstat(shimSocket(id)); err != nil || fi.Mode()&os.ModeSocket == 0 {
			t.Errorf("no shim socket for sandbox %s at %s (%v): Stop would leave it", id, shimSocket(id), err)
		}
	}
	dir, recorded := c.Dir, c.st.Procs
	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	checkClean(t, before, dir, recorded, veths, sandboxes)
}

// bridgePorts lists the links enslaved to the pod bridge (the host ends
// of the pods' veth pairs).
func bridgePorts() []string {
	ents, _ := os.ReadDir("/sys/class/net")
	var out []string
	for _, e := range ents {
		if m, err := os.Readlink(filepath.Join("/sys/class/net", e.Name(), "master")); err == nil && filepath.Base(m) == BridgeName {
			out = append(out, e.Name())
		}
	}
	return out
}

// testBridgePod runs the echo server as a pod on the bridge network with
// a readiness probe, and checks from the host that it answers at its pod
// IP and that it reaches the apiserver as an in-cluster client.
func testBridgePod(ctx context.Context, t *testing.T, cs kubernetes.Interface) {
	start := time.Now()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "echo", Image: echoImage, ImagePullPolicy: corev1.PullNever,
			Env: []corev1.EnvVar{{Name: "GREETING", Value: "hi"}},
			ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
				HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}},
		}}},
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := waitPodReady(ctx, t, cs, "default", "echo")
	t.Logf("pod create → Ready: %s, IP %s", time.Since(start).Round(time.Millisecond), p.Status.PodIP)
	if !strings.HasPrefix(p.Status.PodIP, strings.TrimSuffix(PodCIDR, "0/24")) {
		t.Errorf("pod IP %s is not in %s", p.Status.PodIP, PodCIDR)
	}
	base := "http://" + p.Status.PodIP + ":8080"
	if got := httpGet(t, base+"/"); got != "hi from echo" {
		t.Errorf("GET %s/ from the host: %q, want %q", base, got, "hi from echo")
	}
	// The in-cluster config dials the `kubernetes` Service's ClusterIP,
	// which only kube-proxy's rules lead to the apiserver.
	if got := httpGet(t, base+"/apiserver"); got != "apiserver: 200 OK" {
		t.Errorf("the pod's in-cluster GET /api through %s: %q, want %q", KubernetesServiceIP, got, "apiserver: 200 OK")
	}
	// A Service of the pod: its ClusterIP answers from the host.
	if _, err := cs.CoreV1().Pods("default").Patch(ctx, "echo", types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"echo"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: "default"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "echo"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clusterIP := "http://" + svc.Spec.ClusterIP + ":80/"
	eventually(ctx, t, "Service echo answers at its ClusterIP "+clusterIP, func() (bool, string) {
		got, err := tryGet(clusterIP)
		return err == nil && got == "hi from echo", fmt.Sprintf("%q, %v", got, err)
	})
}

// testHostNetworkDaemonSet runs the echo server as a privileged
// hostNetwork DaemonSet in kube-system and checks that its one pod is
// ready, answers on the node's address and reaches the apiserver.
func testHostNetworkDaemonSet(ctx context.Context, t *testing.T, cs kubernetes.Interface) {
	const port = 31987
	start := time.Now()
	labels := map[string]string{"app": "host-echo"}
	privileged := true
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "host-echo", Namespace: "kube-system"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					HostNetwork: true,
					Containers: []corev1.Container{{
						Name: "echo", Image: echoImage, ImagePullPolicy: corev1.PullNever,
						Env:             []corev1.EnvVar{{Name: "PORT", Value: strconv.Itoa(port)}, {Name: "GREETING", Value: "host"}},
						SecurityContext: &corev1.SecurityContext{Privileged: &privileged},
						ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
							HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(port)}}},
					}},
				},
			},
		},
	}
	if _, err := cs.AppsV1().DaemonSets("kube-system").Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "DaemonSet host-echo has 1 ready pod", func() (bool, string) {
		d, err := cs.AppsV1().DaemonSets("kube-system").Get(ctx, "host-echo", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return d.Status.DesiredNumberScheduled == 1 && d.Status.NumberReady == 1,
			fmt.Sprintf("desired %d, ready %d", d.Status.DesiredNumberScheduled, d.Status.NumberReady)
	})
	t.Logf("DaemonSet create → pod Ready: %s", time.Since(start).Round(time.Millisecond))
	host, _ := os.Hostname()
	base := "http://" + hostPort(port)
	if got, want := httpGet(t, base+"/"), "host from "+host; got != want {
		t.Errorf("GET %s/: %q, want %q (the host's name: host network)", base, got, want)
	}
	if got := httpGet(t, base+"/apiserver"); got != "apiserver: 200 OK" {
		t.Errorf("the hostNetwork pod's in-cluster GET /api: %q, want %q", got, "apiserver: 200 OK")
	}
}

// checkClean checks that nothing of the stopped cluster is left.
func checkClean(t *testing.T, before hostSnapshot, dir string, recorded []proc, veths, sandboxes []string) {
	t.Helper()
	for _, p := range recorded {
		if p.alive() {
			t.Errorf("process %s (pid %d) still runs", p.Name, p.PID)
		}
	}
	if ps := procsMentioning(dir, LockDir); len(ps) > 0 {
		t.Errorf("processes naming %s or %s still run: %v", dir, LockDir, ps)
	}
	if m, err := mountsUnder(DefaultKubeletRootDir, dir, LockDir); err != nil || len(m) > 0 {
		t.Errorf("mounts left: %v (%v)", m, err)
	}
	if nodeIPPresent() {
		t.Errorf("%s/32 still on lo", NodeIP)
	}
	if linkExists(BridgeName) {
		t.Errorf("bridge %s still exists", BridgeName)
	}
	if out, err := exec.Command("nft", "list", "tables").Output(); err == nil && strings.Contains(string(out), "kube-proxy") {
		t.Errorf("kube-proxy's nftables tables left:\n%s", out)
	}
	for _, v := range veths {
		if linkExists(v) {
			t.Errorf("the pod's veth %s still exists", v)
		}
	}
	after := snapshot(t)
	for _, id := range sandboxes {
		if _, err := os.Lstat(shimSocket(id)); err == nil {
			t.Errorf("shim socket %s of sandbox %s left", shimSocket(id), id)
		}
	}
	results, _ := os.ReadDir(cniResultsDir)
	for _, r := range results {
		for _, id := range sandboxes {
			if strings.Contains(r.Name(), id) || strings.HasPrefix(r.Name(), NetworkName+"-") {
				t.Errorf("CNI result %s of the cluster's pods left in %s", r.Name(), cniResultsDir)
			}
		}
	}
	if cg := kubepodsCgroups(); len(cg) > 0 {
		t.Errorf("kubepods cgroups left: %v", cg)
	}
	for k, v := range before.sysctls {
		if after.sysctls[k] != v {
			t.Errorf("sysctl %s = %s, was %s before", k, after.sysctls[k], v)
		}
	}
	for _, p := range hostPaths {
		if before.exists[p] != after.exists[p] {
			t.Errorf("%s: existed before: %v, after: %v", p, before.exists[p], after.exists[p])
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("work directory %s still exists (%v)", dir, err)
	}
	if ents, _ := os.ReadDir(LockDir); len(ents) != 1 || ents[0].Name() != "lock" {
		t.Errorf("%s holds %v, want only the lock file", LockDir, ents)
	}
}

// TestCrashedRunHelper is TestCluster's crashing run (only with
// crashEnv set): it starts a cluster, runs a pod of the pause image, and
// exits with status 3 without stopping anything.
func TestCrashedRunHelper(t *testing.T) {
	if os.Getenv(crashEnv) == "" {
		t.Skip("run by TestCluster")
	}
	o := DefaultOptions()
	o.LockWait = testLockWait
	o.Progress = os.Stdout
	c, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "doomed", Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "pause", Image: PauseImage, ImagePullPolicy: corev1.PullNever}}},
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "pod doomed Running", func() (bool, string) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "doomed", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodRunning, string(p.Status.Phase)
	})
	fmt.Println("crashing now")
	os.Exit(3)
}

// TestSecondStartHelper is TestCluster's second starter (only with
// secondEnv set): it prints Start's error.
func TestSecondStartHelper(t *testing.T) {
	if os.Getenv(secondEnv) == "" {
		t.Skip("run by TestCluster")
	}
	c, err := Start(context.Background(), DefaultOptions())
	if err == nil {
		_ = c.Stop()
		t.Fatal("a second cluster started")
	}
	fmt.Println("second Start:", err)
}

// requireCluster skips t (fails it in CI) when the cluster cannot start
// here, as StartForTest does, and gives bin/.
func requireCluster(t *testing.T) string {
	t.Helper()
	bin, err := controlplane.BinDir()
	if err == nil {
		err = Check(bin)
	}
	if err != nil {
		msg := "the local cluster cannot start here: " + strings.ReplaceAll(err.Error(), "\n", "; ")
		if os.Getenv("CONVERGE_REQUIRE_NODEPLANE") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bin
}

// waitPodReady waits for the pod's Ready condition and gives the pod.
func waitPodReady(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	eventually(ctx, t, "pod "+ns+"/"+name+" Ready", func() (bool, string) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pod = p
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true, ""
			}
		}
		return false, fmt.Sprintf("phase %s, conditions %v, container statuses %v", p.Status.Phase, p.Status.Conditions, p.Status.ContainerStatuses)
	})
	return pod
}

// eventually polls cond every 100ms for up to a minute, failing t with
// cond's last word when it never holds.
func eventually(ctx context.Context, t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("%s: not within a minute (last: %s)", what, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// httpGet does a GET from the host and gives the trimmed body.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	got, err := tryGet(url)
	if err != nil {
		t.Errorf("GET %s: %v", url, err)
	}
	return got
}

// tryGet GETs url (10 s at most) and gives the trimmed body.
func tryGet(url string) (string, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b)), err
}

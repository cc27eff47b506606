package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	e2ecluster "github.com/converge-dev/converge/internal/e2e/cluster"
	localcluster "github.com/converge-dev/converge/internal/testing/cluster"
	"github.com/converge-dev/converge/internal/testing/controlplane"
	"github.com/converge-dev/converge/internal/testing/gitserver"
	"github.com/converge-dev/converge/internal/testing/guestimage"
	"github.com/converge-dev/converge/internal/testing/vmtest"
)

// What BenchmarkVMFromDataVolume creates.
const (
	benchVMNS    = "bench-vm"
	benchFloorDV = "floor-root"
	// benchSerialDir is where the VM agent's virtlogd writes the serial
	// consoles on the node (components/virt VMAgentStateDir, serial/).
	benchSerialDir = "/var/lib/converge/vm/serial"
)

// benchVMYAML is a VirtualMachine running hack/guest's disk.img: from a
// dataVolumeTemplates DataVolume importing url when url is set, else from
// the existing DataVolume benchFloorDV; with a cloudInitNoCloud disk and
// the default pod network, as the chain test's (internal/e2e/cluster).
func benchVMYAML(name, url string) string {
	var templates, root string
	if url != "" {
		templates = fmt.Sprintf(`  dataVolumeTemplates:
    - metadata:
        name: %[1]s-root
      spec:
        source:
          http:
            url: %[2]s
        storage:
          accessModes: [ReadWriteOnce]
          storageClassName: hostpath-csi-local
          resources:
            requests:
              storage: 64Mi
`, name, url)
		root = name + "-root"
	} else {
		root = benchFloorDV
	}
	return fmt.Sprintf(`apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: %s
  namespace: %s
spec:
  runStrategy: Always
%s  template:
    spec:
      terminationGracePeriodSeconds: 2
      domain:
        cpu:
          cores: 1
        memory:
          guest: 128Mi
        devices:
          disks:
            - name: rootdisk
              disk:
                bus: virtio
            - name: cloudinitdisk
              disk:
                bus: virtio
      volumes:
        - name: rootdisk
          dataVolume:
            name: %s
        - name: cloudinitdisk
          cloudInitNoCloud:
            userData: |
              #cloud-config
`, name, benchVMNS, templates, root)
}

// BenchmarkVMFromDataVolume measures, on the machine's real cluster with
// converge installed and the example synced (Ready through the native
// operators), a VirtualMachine created through the API until the guest's
// marker ("CONVERGE-GUEST-OK <name>", hack/guest) is on its serial
// console (the agent's console log on the node, polled every 50 ms),
// next to a floor measured in the same run:
//
//   - pvc-floor: a VM booting the same disk from a DataVolume imported
//     once before (not timed): scheduling, the domain, the boot;
//   - datavolume: a VM whose dataVolumeTemplates DataVolume imports
//     hack/guest's disk.img over HTTP from a file server on the node
//     address: the VM controller creating the DataVolume, the import into
//     a hostpath volume, then the same boot. Reported: median-ms, min-ms
//     and their ratios to pvc-floor's (x-floor, min-x-floor).
//
// The example's HyperConverged names the local cluster's CNI directories
// (the pod network the VMs get by default). Each VM is deleted (not
// timed) and its VMI awaited gone before the next. It skips, saying why, while `converge vet` refuses its VM (the
// VM features of issue 15 not there yet), and where the e2e tests skip.
func BenchmarkVMFromDataVolume(b *testing.B) {
	cli := vmtest.BuildBinary(b, "./cmd/converge")
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "vm.yaml"), []byte(benchVMYAML("vet", "http://"+localcluster.NodeIP+"/disk.img")), 0o644); err != nil {
		b.Fatal(err)
	}
	if out, err := exec.Command(cli, "vet", dir).CombinedOutput(); err != nil {
		b.Skipf("converge vet refuses the benchmark's VirtualMachine (dataVolumeTemplates, cloudInitNoCloud, a dataVolume volume; issue 15): %v\n%s", err, out)
	}
	guestDir := vmtest.BuildGuest(b)
	e := e2ecluster.StartForBench(b)
	ctx := context.Background()
	repo := exampleRepo(b)
	podNetworkDirs(b, repo, e)
	srv := gitserver.NewHTTP(b, filepath.Dir(repo.Dir), gitserver.HTTPOptions{Addr: localcluster.NodeIP + ":0"})
	sha := gitserver.Git(b, repo.Dir, "rev-parse", "HEAD")
	if r := e.Converge(ctx, "install", "--sync-url", srv.RepoURL(repo), "--timeout", "3m"); r.Err != nil {
		b.Fatal(r)
	}
	waitSyncReady(b, e, "main@sha1:"+sha)
	files := guestimage.ServeFiles(b, localcluster.NodeIP+":0", guestDir, guestimage.DiskImage)
	url := files.FileURL(guestimage.DiskImage)

	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, kubevirtv1.AddToScheme, cdiv1.AddToScheme} {
		if err := add(s); err != nil {
			b.Fatal(err)
		}
	}
	c, err := client.New(e.Cluster.Config, client.Options{Scheme: s})
	if err != nil {
		b.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchVMNS}}
	if err := c.Create(ctx, ns); err != nil {
		b.Fatal(err)
	}
	// before the cluster stops: the namespace's volumes go, so the pool on
	// the host keeps none of them
	b.Cleanup(func() {
		if err := c.Delete(ctx, ns); err != nil {
			b.Errorf("deleting namespace %s: %v", benchVMNS, err)
			return
		}
		benchPoll(b, 3*time.Minute, "namespace "+benchVMNS+" and its volumes gone", func() (bool, string) {
			var pvs corev1.PersistentVolumeList
			if err := c.List(ctx, &pvs); err != nil {
				return false, err.Error()
			}
			for _, pv := range pvs.Items {
				if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == benchVMNS {
					return false, "PV " + pv.Name
				}
			}
			err := c.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	})
	floorDV := &cdiv1.DataVolume{}
	if err := yaml.UnmarshalStrict(fmt.Appendf(nil, `apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: %s
  namespace: %s
spec:
  source:
    http:
      url: %s
  storage:
    accessModes: [ReadWriteOnce]
    storageClassName: hostpath-csi-local
    resources:
      requests:
        storage: 64Mi
`, benchFloorDV, benchVMNS, url), floorDV); err != nil {
		b.Fatal(err)
	}
	if err := c.Create(ctx, floorDV); err != nil {
		b.Fatal(err)
	}
	benchPoll(b, 5*time.Minute, "DataVolume "+benchFloorDV+" Succeeded", func() (bool, string) {
		err := c.Get(ctx, client.ObjectKeyFromObject(floorDV), floorDV)
		return err == nil && floorDV.Status.Phase == cdiv1.Succeeded, fmt.Sprintf("%v %s %s", err, floorDV.Status.Phase, floorDV.Status.Progress)
	})

	// the agent's serial logs outlive VMIs and clusters: names of this
	// run only, and only what is written after the creation counts
	runID := fmt.Sprintf("%x", time.Now().UnixNano()&0xffffff)
	n := 0
	run := func(b *testing.B, withTemplate bool) []time.Duration {
		var ds []time.Duration
		for b.Loop() {
			n++
			name := fmt.Sprintf("bench-%s-%d", runID, n)
			src := ""
			if withTemplate {
				src = url
			}
			vm := &kubevirtv1.VirtualMachine{}
			if err := yaml.UnmarshalStrict([]byte(benchVMYAML(name, src)), vm); err != nil {
				b.Fatal(err)
			}
			log := filepath.Join(benchSerialDir, benchVMNS+"_"+name+"-serial.log")
			marker := guestimage.MarkerOK + " " + name + " "
			var offset int64
			if st, err := os.Stat(log); err == nil {
				offset = st.Size()
			}
			start := time.Now()
			if err := c.Create(ctx, vm); err != nil {
				b.Fatalf("creating VirtualMachine %s (converge vet accepted it): %v", name, err)
			}
			benchPoll(b, 10*time.Minute, "the guest's marker in "+log, func() (bool, string) {
				body, err := os.ReadFile(log)
				if int64(len(body)) >= offset {
					body = body[offset:]
				}
				return err == nil && strings.Contains(string(body), marker), fmt.Sprint(err)
			})
			ds = append(ds, time.Since(start))
			b.StopTimer()
			if err := c.Delete(ctx, vm); err != nil {
				b.Fatal(err)
			}
			benchPoll(b, 3*time.Minute, "VMI "+name+" gone", func() (bool, string) {
				err := c.Get(ctx, client.ObjectKeyFromObject(vm), &kubevirtv1.VirtualMachineInstance{})
				return apierrors.IsNotFound(err), fmt.Sprint(err)
			})
			b.StartTimer()
		}
		return ds
	}
	var floor stats
	b.Run("pvc-floor", func(b *testing.B) { floor = report(b, run(b, false), stats{}) })
	b.Run("datavolume", func(b *testing.B) { report(b, run(b, true), floor) })
}

// podNetworkDirs commits to the example's HyperConverged the annotations
// naming where the local cluster's runtime keeps its CNI configuration,
// plugins and host-local leases (README, "the pod network"), so that VMIs
// get the pod network.
func podNetworkDirs(b *testing.B, repo *gitserver.Repo, e *e2ecluster.Env) {
	b.Helper()
	bin, err := controlplane.BinDir()
	if err != nil {
		b.Fatal(err)
	}
	const anchor = "  namespace: kubevirt-hyperconverged\n"
	ann := fmt.Sprintf("  annotations:\n    converge.dev/pod-network-conf-dir: %s\n    converge.dev/pod-network-bin-dir: %s\n    converge.dev/pod-network-lease-dir: %s\n",
		filepath.Join(e.Cluster.Dir, "cni", "net.d"), filepath.Join(bin, "cni"), filepath.Join(e.Cluster.Dir, "cni", "ipam"))
	repo.Replace(b, "the nodes' pod network directories", "hyperconverged.yaml", anchor, anchor+ann)
}

// benchPoll polls cond every 50 ms until it holds, failing b with its
// last word after timeout.
func benchPoll(b *testing.B, timeout time.Duration, what string, cond func() (bool, string)) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: not within %s (last: %s)", what, timeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

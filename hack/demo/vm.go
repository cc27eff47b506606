package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	localcluster "github.com/converge-dev/converge/internal/testing/cluster"
)

// The demo's VM: a VirtualMachine committed to the config repository.
const (
	vmNS     = "demo-vms"
	vmName   = "web"
	vmFile   = configPath + "/vm-web.yaml"
	vmMarker = "hello from cloud-init, committed to Git"
)

// vmManifest is the VM as a KubeVirt user writes it: a Namespace, and a
// VirtualMachine whose root disk is a dataVolumeTemplates DataVolume
// imported over HTTP from diskURL (a Debian qcow2 image) into a hostpath
// volume, with cloud-init NoCloud user data whose runcmd the guest's
// cloud-init runs, and no interfaces (KubeVirt's default: the pod network
// with masquerade, DHCP from the node agent).
func vmManifest(diskURL string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: %[2]s
  namespace: %[1]s
spec:
  runStrategy: Always
  dataVolumeTemplates:
    - metadata:
        name: %[2]s-root
      spec:
        source:
          http:
            url: %[3]s
        storage:
          storageClassName: hostpath-csi-local
          resources:
            requests:
              storage: 2Gi
  template:
    spec:
      domain:
        memory:
          guest: 1Gi
        devices:
          disks:
            - name: root
              disk: {bus: virtio}
            - name: cloudinit
              disk: {bus: virtio}
      volumes:
        - name: root
          dataVolume:
            name: %[2]s-root
        - name: cloudinit
          cloudInitNoCloud:
            userData: |
              #cloud-config
              runcmd:
                - echo %[4]s
`, vmNS, vmName, diskURL, vmMarker)
}

// vm commits a VirtualMachine to the config repository and follows it
// to a booted guest: the Sync applies it with the workloads, the VM
// controller creates its DataVolume, the importer fills a hostpath
// volume over HTTP, the VM agent boots the guest under libvirt with a
// cloud-init ISO and the pod network, and `converge vm console` reads
// the output of the user data's runcmd, which cloud-init runs in the
// guest's Debian, started by systemd. A second commit removes the VM, and
// the Sync prunes it with its DataVolume, volume and Namespace.
func (d *demo) vm(ctx context.Context) error {
	say("a VM from Git: a VirtualMachine with a DataVolume imported over HTTP, cloud-init user data and the pod network")
	disk := filepath.Join(d.bin, "guest", "debian.qcow2")
	if _, err := os.Stat(disk); err != nil {
		return fmt.Errorf("%s: %w (make demo builds it: make guest-debian)", disk, err)
	}
	diskURL, stopDisk, err := serveFile(localcluster.NodeIP, disk)
	if err != nil {
		return err
	}
	defer stopDisk()
	note("the guest's disk (%s: Debian %s installed by debootstrap — the cloud kernel, systemd, cloud-init; hack/guest -debian) is served at %s", disk, debianRelease(d.bin), diskURL)
	if err := os.WriteFile(filepath.Join(d.repo.Dir, vmFile), []byte(vmManifest(diskURL)), 0o644); err != nil {
		return err
	}
	sha, err := d.repo.commit("a VM from Git")
	if err != nil {
		return err
	}
	note("committed %s, adding %s:", d.repo.head(), vmFile)
	fmt.Print(indent(vmManifest(diskURL)))
	start := time.Now()
	// The console is attached as soon as the guest runs: it shows what
	// the guest prints from then on, and cloud-init runs early in its boot.
	fmt.Printf("\n$ converge vm console %s -n %s &   (through converge-controller's virt-api; retried every 200ms until a VMI runs, read until cloud-init has finished)\n", vmName, vmNS)
	console := d.watchConsole(ctx)
	if err := d.show(ctx, "reconcile", "sync", syncName, "-n", syncNS); err != nil {
		return err
	}
	if err := d.followVM(ctx, "main@sha1:"+sha, start); err != nil {
		return err
	}
	d.record("commit → VM Ready (disk imported, guest booted)", time.Since(start))
	if _, err := d.kubectl(ctx, "get", "virtualmachines,virtualmachineinstances,datavolumes,persistentvolumeclaims", "-n", vmNS); err != nil {
		return err
	}
	if err := d.show(ctx, "tree", syncName, "-n", syncNS); err != nil {
		return err
	}
	say("the guest's serial console: Debian boots with systemd, cloud-init runs the runcmd committed to Git; the VM agent's DHCP gave it its pod network address")
	r := <-console
	if r.err != nil {
		return r.err
	}
	lines := strings.Split(r.out, "\n")
	// The whole console stays for a reader who wants more than the
	// highlights: bin/ is gitignored and the next demo overwrites it.
	full := filepath.Join(d.bin, "demo-console.log")
	if err := os.WriteFile(full, []byte(r.out), 0o644); err != nil {
		return err
	}
	note("the whole console is in %s", full)
	ran, addr := false, false
	var shown []string
	for _, l := range lines {
		l = strings.TrimSpace(strings.TrimPrefix(l, "\r"))
		// the runcmd's echo, on a line of its own in cloud-init's output
		// (which systemd prefixes with the unit's name and pid)
		ran = ran || isMarker(l)
		if consoleHighlight(l) {
			shown = append(shown, l)
			addr = addr || strings.Contains(l, "ci-info: |")
		}
	}
	network := ""
	if addr {
		network = " (with eth0's address from its network table)"
	}
	note("`converge vm console %s -n %s` (started with the commit, above) printed %d lines until cloud-init finished; those of the kernel's banner, cloud-init%s, the runcmd's output and the login prompt:", vmName, vmNS, len(lines), network)
	for _, l := range shown {
		fmt.Println("  " + l)
	}
	if !ran {
		return fmt.Errorf("the console of %s/%s shows no line %q (the runcmd's output):\n%s", vmNS, vmName, vmMarker, r.out)
	}
	d.record("commit → cloud-init finished on the guest's console", r.at.Sub(start))
	return d.pruneVM(ctx)
}

// followVM waits (at most 5 minutes) for the Sync to be Ready at
// revision with every component Healthy (the workloads component is
// Healthy once the VM is Ready), printing the VM's printableStatus and
// its DataVolume's phase and progress as they change.
func (d *demo) followVM(ctx context.Context, revision string, start time.Time) error {
	log := newChangeLog(start)
	deadline := start.Add(5 * time.Minute)
	for {
		vm := d.object(ctx, "kubevirt.io/v1", "VirtualMachine", vmName)
		dv := d.object(ctx, "cdi.kubevirt.io/v1beta1", "DataVolume", vmName+"-root")
		status, _, _ := unstructured.NestedString(vm.Object, "status", "printableStatus")
		phase, _, _ := unstructured.NestedString(dv.Object, "status", "phase")
		progress, _, _ := unstructured.NestedString(dv.Object, "status", "progress")
		log.set("vm", fmt.Sprintf("VirtualMachine %s/%s %s; DataVolume %s %s %s", vmNS, vmName, orDash(status), vmName+"-root", orDash(phase), progress))
		s, err := d.getSync(ctx)
		if err == nil {
			for _, c := range s.Status.Components {
				if c.Name == "workloads" {
					log.set("workloads", fmt.Sprintf("component workloads %s %s", c.Health, shorten(c.Message, 120)))
				}
			}
			if synced(s) && s.Status.LastAppliedRevision == revision {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("VirtualMachine %s/%s: not Ready (Sync Ready at %s) within 5 minutes of the commit; VM %s, DataVolume %s", vmNS, vmName, revision, orDash(status), orDash(phase))
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
}

// consoleResult is what `converge vm console` showed, until when.
type consoleResult struct {
	out string
	at  time.Time
	err error
}

// cloudInitFinished starts the line cloud-init's final-message module
// prints once the final stage (the user's runcmd among its scripts) is
// done: "Cloud-init v. 22.4.2 finished at …".
const cloudInitFinished = " finished at "

// watchConsole runs `converge vm console` on the VM's VMI (the admin
// kubeconfig, through the virt-api), retrying every 200ms while it cannot
// attach (no VMI running yet), until cloud-init says it has finished
// (Debian's boot and cloud-init's stages take minutes under TCG); at most
// 12 minutes. The result arrives on the channel.
func (d *demo) watchConsole(ctx context.Context) <-chan consoleResult {
	done := make(chan consoleResult, 1)
	go func() {
		deadline := time.Now().Add(12 * time.Minute)
		for {
			out, err := d.env.ReadConsole(ctx, vmNS, vmName, cloudInitFinished, 10*time.Minute)
			if err == nil {
				done <- consoleResult{out: out, at: time.Now()}
				return
			}
			if out != "" || time.Now().After(deadline) || ctx.Err() != nil {
				done <- consoleResult{out: out, err: fmt.Errorf("the console of %s/%s: %w", vmNS, vmName, err)}
				return
			}
			if sleep(ctx, 200*time.Millisecond) != nil {
				done <- consoleResult{err: ctx.Err()}
				return
			}
		}
	}()
	return done
}

// pruneVM commits the removal of vmFile and waits (at most 3 minutes)
// until the Sync has pruned the VM, its DataVolume and claim, and the
// Namespace.
func (d *demo) pruneVM(ctx context.Context) error {
	say("prune: a commit removes the VM; the Sync deletes it with its DataVolume, volume and Namespace")
	if err := os.Remove(filepath.Join(d.repo.Dir, vmFile)); err != nil {
		return err
	}
	sha, err := d.repo.commit("remove the VM")
	if err != nil {
		return err
	}
	note("committed %s", d.repo.head())
	start := time.Now()
	if err := d.show(ctx, "reconcile", "sync", syncName, "-n", syncNS); err != nil {
		return err
	}
	revision := "main@sha1:" + sha
	deadline := start.Add(3 * time.Minute)
	for {
		s, err := d.getSync(ctx)
		gone := d.gone(ctx, "kubevirt.io/v1", "VirtualMachine", vmName) && d.gone(ctx, "cdi.kubevirt.io/v1beta1", "DataVolume", vmName+"-root") &&
			d.gone(ctx, "v1", "PersistentVolumeClaim", vmName+"-root") && d.gone(ctx, "v1", "Namespace", "")
		if err == nil && s.Status.LastAppliedRevision == revision && gone {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the VM %s/%s, its DataVolume, claim or Namespace are still there 3 minutes after the commit removing them", vmNS, vmName)
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
	d.record("commit removing the VM → VM, DataVolume, claim, Namespace gone", time.Since(start))
	note("pruned %s after the commit", round(time.Since(start)))
	return d.show(ctx, "get", "syncs", "-n", syncNS)
}

// object reads the object of kind named name in vmNS (an empty object
// when it cannot be read).
func (d *demo) object(ctx context.Context, apiVersion, kind, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	_ = d.env.Client.Get(ctx, client.ObjectKey{Namespace: vmNS, Name: name}, u)
	return u
}

// gone reports whether the object of kind named name in vmNS (the
// Namespace vmNS itself when kind is Namespace) no longer exists.
func (d *demo) gone(ctx context.Context, apiVersion, kind, name string) bool {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	key := client.ObjectKey{Namespace: vmNS, Name: name}
	if kind == "Namespace" {
		key = client.ObjectKey{Name: vmNS}
	}
	return apierrors.IsNotFound(d.env.Client.Get(ctx, key, u))
}

// output runs path args… with the cluster's kubeconfig and gives its
// trimmed stdout; the error carries its stderr.
func (d *demo) output(ctx context.Context, path string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+d.env.Cluster.Kubeconfig)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("%s %s: %w: %s", filepath.Base(path), strings.Join(args, " "), err, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// serveFile serves the file at path over HTTP on a free port of host
// (the node address, which the cdi-importer on the host network
// reaches), as a web server holding a cloud image would. It gives the
// file's URL and a function stopping the server.
func serveFile(host, path string) (string, func(), error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", nil, fmt.Errorf("serving %s: %w", path, err)
	}
	name := "/" + filepath.Base(path)
	mux := http.NewServeMux()
	mux.HandleFunc(name, func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, path) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return "http://" + l.Addr().String() + name, func() { _ = srv.Close() }, nil
}

// consoleHighlight reports whether the console line l is one the demo
// shows: the kernel's banner, cloud-init's own lines, its network table's
// row of eth0's global (DHCP) address, the runcmd's output and getty's
// login prompt. Under systemd cloud-init's lines carry the kernel's time and
// a "cloud-init[pid]: " prefix, so they are matched anywhere in the line.
func consoleHighlight(l string) bool {
	return strings.Contains(l, "Linux version") || strings.Contains(l, "Cloud-init v.") || isMarker(l) ||
		(strings.Contains(l, "ci-info: |") && strings.Contains(l, " eth0 ") && strings.Contains(l, " global ")) ||
		strings.Contains(l, " login:")
}

// debianRelease gives the Debian version debian.packages records for
// base-files (the release's version), or "bookworm" when unreadable.
func debianRelease(bin string) string {
	b, err := os.ReadFile(filepath.Join(bin, "guest", "debian.packages"))
	if err != nil {
		return "bookworm"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "base-files="); ok {
			return v
		}
	}
	return "bookworm"
}

// indent gives s with every line indented by four spaces.
func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") + "\n"
}

// isMarker reports whether the console line l is the runcmd's output: the
// marker alone, or after systemd's "cloud-init[pid]: " prefix.
func isMarker(l string) bool {
	return l == vmMarker || strings.HasSuffix(l, "]: "+vmMarker)
}

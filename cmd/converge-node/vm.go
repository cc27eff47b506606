package main

// converge-node vm: the VM agent (virt-handler and virt-launcher roles) on
// libvirt. In this slice it serves VMIs from YAML files (--vmi-file); the
// API-backed source (--kubeconfig) is not implemented yet.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/nodeplane/vm/agent"
	"github.com/converge-dev/converge/nodeplane/vm/domain"
	"github.com/converge-dev/converge/nodeplane/vm/libvirt"
)

func init() { subcommands = append(subcommands, newVMCommand) }

// vmFlags are the flags of converge-node vm.
type vmFlags struct {
	nodeName    string
	libvirtURI  string
	kubeconfig  string
	stateDir    string
	domainType  string
	emulator    string
	machineType string
	podBridge   string
	bridges     map[string]string
	vmiFiles    []string
	resync      time.Duration
}

func newVMCommand() *cobra.Command {
	host, _ := os.Hostname()
	f := &vmFlags{
		nodeName:    host,
		libvirtURI:  "qemu:///system",
		stateDir:    "/var/lib/converge/vm",
		domainType:  "qemu",
		emulator:    "/usr/bin/qemu-system-x86_64",
		machineType: "q35",
		resync:      30 * time.Second,
	}
	cmd := &cobra.Command{
		Use:   "vm",
		Short: "run the VMs of this node on libvirt (KubeVirt's virt-handler and virt-launcher roles)",
		Long: `vm converges this node's libvirt domains on the VirtualMachineInstances
assigned to it and reports their status (phase, Ready, interfaces).

This version serves VMIs read from --vmi-file (YAML, several documents per
file allowed) and prints one line per status change; the API source
(--kubeconfig) is not implemented yet. Stopping the command leaves the
domains running, as a virt-handler restart does; a new run adopts them.

The domain type is qemu (TCG) unless --domain-type says otherwise: converge
never picks kvm because /dev/kvm exists. Use --libvirt-uri test:///default
--domain-type test --emulator "" for libvirt's test driver.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runVM(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.nodeName, "node-name", f.nodeName, "this node's name, reported in status.nodeName")
	fl.StringVar(&f.libvirtURI, "libvirt-uri", f.libvirtURI, "libvirt connection URI")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the API server to watch VMIs on (not implemented yet)")
	fl.StringVar(&f.stateDir, "state-dir", f.stateDir, "the agent's directory; serial console logs go to <state-dir>/serial")
	fl.StringVar(&f.domainType, "domain-type", f.domainType, "libvirt domain type: qemu (TCG), kvm or test")
	fl.StringVar(&f.emulator, "emulator", f.emulator, "QEMU binary; empty leaves it to libvirt")
	fl.StringVar(&f.machineType, "machine-type", f.machineType, "machine type when a VMI sets none")
	fl.StringVar(&f.podBridge, "pod-bridge", "", "Linux bridge for VMI interfaces on the pod network (empty: refused)")
	fl.StringToStringVar(&f.bridges, "network-bridge", nil, "Linux bridge per multus networkName, as name=bridge (repeatable)")
	fl.StringArrayVar(&f.vmiFiles, "vmi-file", nil, "YAML file of VirtualMachineInstances for this node (repeatable)")
	fl.DurationVar(&f.resync, "resync", f.resync, "full re-read of libvirt at least this often")
	return cmd
}

func runVM(cmd *cobra.Command, f *vmFlags) error {
	if f.kubeconfig != "" {
		return errors.New("--kubeconfig: the API source is not implemented yet; pass VMIs with --vmi-file")
	}
	if len(f.vmiFiles) == 0 {
		return errors.New("--vmi-file: at least one file of VirtualMachineInstances is required")
	}
	if f.nodeName == "" {
		return errors.New("--node-name: required (the host name is unknown)")
	}
	var vmis []*kubevirtv1.VirtualMachineInstance
	for _, path := range f.vmiFiles {
		v, err := readVMIFile(path)
		if err != nil {
			return err
		}
		vmis = append(vmis, v...)
	}
	opts := agent.DefaultOptions(f.nodeName)
	opts.Domain.DomainType, opts.Domain.Emulator, opts.Domain.MachineType = f.domainType, f.emulator, f.machineType
	if f.stateDir != "" && f.domainType != "test" {
		dir := filepath.Join(f.stateDir, "serial")
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return fmt.Errorf("--state-dir: %w", err)
		}
		opts.Domain.SerialLogDir = dir
	}
	opts.Domain.ResolveBridge = bridgeResolver(f.podBridge, f.bridges)
	zl, err := zap.NewProduction()
	if err != nil {
		return err
	}
	defer func() { _ = zl.Sync() }()
	opts.Log = zapr.NewLogger(zl).WithName("vm")

	conn, err := libvirt.Connect(f.libvirtURI)
	if err != nil {
		return err
	}
	defer conn.Close()
	src := agent.NewStaticSource(vmis...)
	go printReports(cmd.OutOrStdout(), src.Stored(), opts.Log)
	return agent.New(conn, opts).Run(cmd.Context(), src, f.resync)
}

// bridgeResolver maps the pod network to podBridge and multus networks
// (by networkName, with or without namespace) to byName.
func bridgeResolver(podBridge string, byName map[string]string) func(string, kubevirtv1.Network) (string, error) {
	return func(namespace string, n kubevirtv1.Network) (string, error) {
		switch {
		case n.Pod != nil && podBridge != "":
			return podBridge, nil
		case n.Pod != nil:
			return "", errors.New("this node has no pod bridge (--pod-bridge)")
		case n.Multus != nil:
			if b, ok := byName[n.Multus.NetworkName]; ok {
				return b, nil
			}
			if b, ok := byName[namespace+"/"+n.Multus.NetworkName]; ok {
				return b, nil
			}
			return "", fmt.Errorf("network %q has no bridge on this node (--network-bridge)", n.Multus.NetworkName)
		}
		return "", errors.New("no network source")
	}
}

// printReports prints a line per VMI whenever its phase or readiness
// changes: "<namespace>/<name> <phase> ready=<status> [reason]", and
// "<namespace>/<name> removed".
func printReports(w io.Writer, reports <-chan agent.Report, log logr.Logger) {
	last := map[string]string{}
	for r := range reports {
		id := r.Namespace + "/" + r.Name
		line := id + " removed"
		if !r.Removed {
			ready, reason := "Unknown", ""
			for _, c := range r.Status.Conditions {
				if c.Type == kubevirtv1.VirtualMachineInstanceReady {
					ready, reason = string(c.Status), c.Reason
				}
			}
			line = strings.TrimSpace(fmt.Sprintf("%s %s ready=%s %s", id, r.Status.Phase, ready, reason))
		}
		if last[id] == line {
			continue
		}
		last[id] = line
		if _, err := fmt.Fprintln(w, line); err != nil {
			log.Error(err, "printing status")
		}
	}
}

// readVMIFile decodes every YAML document of path as a VMI, strictly: an
// unknown field is an error naming the file and document.
func readVMIFile(path string) ([]*kubevirtv1.VirtualMachineInstance, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--vmi-file: %w", err)
	}
	var out []*kubevirtv1.VirtualMachineInstance
	for i, doc := range bytes.Split(raw, []byte("\n---")) {
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		vmi, err := domain.DecodeVMI(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i+1, err)
		}
		if vmi.Kind != "VirtualMachineInstance" {
			return nil, fmt.Errorf("%s: document %d: kind %q, expected VirtualMachineInstance", path, i+1, vmi.Kind)
		}
		if vmi.Namespace == "" {
			vmi.Namespace = "default"
		}
		if vmi.UID == "" {
			// the API server would set one; a file gets a stable one
			vmi.UID = types.UID(uuid.NewSHA1(uuid.NameSpaceURL, []byte("vmi:"+vmi.Namespace+"/"+vmi.Name)).String())
		}
		out = append(out, vmi)
	}
	return out, nil
}

func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' {
			b.Write(l)
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

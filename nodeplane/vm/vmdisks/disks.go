package vmdisks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/api/vmisupport"
	"github.com/converge-dev/converge/nodeplane/vm/domain"
)

// Disks prepares and releases the volumes a node makes for its VMIs. It
// is safe for concurrent use; Prepare and Release of one VMI must not run
// at the same time.
type Disks struct {
	opts  Options
	cache *imageCache
	pulls pulls
}

// New gives Disks with opts; StateDir must be absolute.
func New(opts Options) (*Disks, error) {
	if !filepath.IsAbs(opts.StateDir) {
		return nil, fmt.Errorf("VM disks: state directory %q: expected an absolute path", opts.StateDir)
	}
	opts.StateDir = filepath.Clean(opts.StateDir)
	if opts.QemuImg == "" {
		opts.QemuImg = "qemu-img"
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	d := &Disks{opts: opts}
	d.cache = &imageCache{dir: filepath.Join(opts.StateDir, "containerdisks"), opts: &d.opts}
	return d, nil
}

// VMIDir gives the directory of a VMI's disks:
// <StateDir>/vmis/<namespace>_<name>_<uid>. Kubernetes names and UIDs
// contain no "_", so the name is unambiguous.
func (d *Disks) VMIDir(namespace, name string, uid types.UID) string {
	return filepath.Join(d.opts.StateDir, "vmis", namespace+"_"+name+"_"+string(uid))
}

// Resolve gives where volume's disk of vmi is once Prepare has run, and
// refuses, as vmisupport.FieldErrors relative to the volume's source, the
// values Prepare could not honour; it reads and writes nothing. It is
// domain.Options.ResolveVolume.
func (d *Disks) Resolve(vmi *kubevirtv1.VirtualMachineInstance, volume kubevirtv1.Volume) (domain.DiskSource, error) {
	if err := checkIdentity(vmi); err != nil {
		return domain.DiskSource{}, err
	}
	var errs vmisupport.FieldErrors
	if err := checkFileName(volume.Name); err != nil {
		return domain.DiskSource{}, fmt.Errorf("volume name %q: %w", volume.Name, err)
	}
	dir := d.VMIDir(vmi.Namespace, vmi.Name, vmi.UID)
	switch {
	case volume.ContainerDisk != nil:
		d.checkContainerDisk(&errs, volume.ContainerDisk)
		return done(domain.DiskSource{Path: filepath.Join(dir, volume.Name+".qcow2"), Format: domain.FormatQCOW2}, errs)
	case volume.EmptyDisk != nil:
		if volume.EmptyDisk.Capacity.Value() < 1 {
			errs.Add("capacity", "%s: expected at least 1 byte", volume.EmptyDisk.Capacity.String())
		}
		return done(domain.DiskSource{Path: filepath.Join(dir, volume.Name+".qcow2"), Format: domain.FormatQCOW2}, errs)
	case volume.CloudInitNoCloud != nil, volume.CloudInitConfigDrive != nil:
		d.checkCloudInit(&errs, vmi, volume)
	case volume.Secret != nil:
		if volume.Secret.SecretName == "" {
			errs.Add("secretName", "required")
		}
		d.needSecrets(&errs, "secretName")
		checkLabel(&errs, volume.Secret.VolumeLabel)
	case volume.ConfigMap != nil:
		if volume.ConfigMap.Name == "" {
			errs.Add("name", "required")
		}
		if d.opts.ConfigMaps == nil {
			errs.Add("name", "this node reads no ConfigMaps (the agent has no ConfigMap getter)")
		}
		checkLabel(&errs, volume.ConfigMap.VolumeLabel)
	default:
		return domain.DiskSource{}, fmt.Errorf("volume %q: not a volume the node prepares", volume.Name)
	}
	return done(domain.DiskSource{Path: filepath.Join(dir, volume.Name+".iso"), Format: domain.FormatRaw}, errs)
}

// underSource gives Resolve's field errors with paths from the volume
// (source.field) instead of from its source.
func underSource(source string, err error) error {
	var fes vmisupport.FieldErrors
	if !errors.As(err, &fes) {
		return err
	}
	out := make(vmisupport.FieldErrors, len(fes))
	for i, e := range fes {
		p := source
		if e.Path != "" {
			p += "." + e.Path
		}
		out[i] = &vmisupport.FieldError{Path: p, Reason: e.Reason}
	}
	return out
}

func done(src domain.DiskSource, errs vmisupport.FieldErrors) (domain.DiskSource, error) {
	if len(errs) > 0 {
		return domain.DiskSource{}, errs.Sorted()
	}
	return src, nil
}

func (d *Disks) needSecrets(errs *vmisupport.FieldErrors, path string) {
	if d.opts.Secrets == nil {
		errs.Add(path, "this node reads no Secrets (the agent has no Secret getter)")
	}
}

// checkIdentity refuses a VMI whose namespace, name or UID cannot name
// its directory.
func checkIdentity(vmi *kubevirtv1.VirtualMachineInstance) error {
	for _, f := range []struct{ what, v string }{{"namespace", vmi.Namespace}, {"name", vmi.Name}, {"uid", string(vmi.UID)}} {
		if f.v == "" || strings.ContainsAny(f.v, "/_\x00") || f.v == "." || f.v == ".." {
			return fmt.Errorf("VirtualMachineInstance %s/%s: metadata.%s %q: expected a Kubernetes name (no '/' or '_')", vmi.Namespace, vmi.Name, f.what, f.v)
		}
	}
	return nil
}

// checkFileName refuses a volume name that cannot be a file name in the
// VMI's directory.
func checkFileName(name string) error {
	switch {
	case name == "":
		return errors.New("required")
	case strings.ContainsAny(name, "/\x00"), strings.HasPrefix(name, "."):
		return errors.New("it names a file on the node: expected no '/' and no leading '.'")
	case len(name) > 200:
		return errors.New("it names a file on the node: expected at most 200 bytes")
	}
	return nil
}

// checkLabel refuses an ISO volume label longer than the 32 bytes of an
// ISO 9660 volume identifier.
func checkLabel(errs *vmisupport.FieldErrors, label string) {
	if len(label) > 32 {
		errs.Add("volumeLabel", "%q: expected at most 32 bytes (an ISO 9660 volume identifier)", label)
	}
}

// Prepare makes the files of every volume of vmi the node prepares, in
// the VMI's directory, before its domain is defined: cloud-init, secret
// and configMap ISOs (made again on every call, so that they carry the
// current data), emptyDisk images and containerDisk overlays (made once:
// a VMI keeps the image it started with). It is idempotent; the error
// names the VMI and the volume.
func (d *Disks) Prepare(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) error {
	id := vmi.Namespace + "/" + vmi.Name
	var errs []error
	for _, v := range vmi.Spec.Volumes {
		if domain.NodeVolumeSource(v) == "" {
			continue
		}
		src, err := d.Resolve(vmi, v)
		if err != nil {
			errs = append(errs, fmt.Errorf("VirtualMachineInstance %s: volume %q: %w", id, v.Name, underSource(domain.NodeVolumeSource(v), err)))
			continue
		}
		if err := os.MkdirAll(filepath.Dir(src.Path), 0o700); err != nil {
			return fmt.Errorf("VirtualMachineInstance %s: %w", id, err)
		}
		switch {
		case v.ContainerDisk != nil:
			err = d.prepareContainerDisk(ctx, vmi, v, src.Path)
		case v.EmptyDisk != nil:
			err = d.prepareEmptyDisk(ctx, v.EmptyDisk.Capacity.Value(), src.Path)
		case v.CloudInitNoCloud != nil, v.CloudInitConfigDrive != nil:
			err = d.prepareCloudInit(ctx, vmi, v, src.Path)
		case v.Secret != nil:
			err = d.prepareObjectISO(ctx, "Secret", d.opts.Secrets, vmi.Namespace, v.Secret.SecretName, v.Secret.Optional, v.Secret.VolumeLabel, src.Path)
		case v.ConfigMap != nil:
			err = d.prepareObjectISO(ctx, "ConfigMap", d.opts.ConfigMaps, vmi.Namespace, v.ConfigMap.Name, v.ConfigMap.Optional, v.ConfigMap.VolumeLabel, src.Path)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("VirtualMachineInstance %s: volume %q: %w", id, v.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Release removes the VMI's directory and everything in it, once its
// domain is gone; the containerDisk cache stays. Releasing a VMI that
// has nothing on the node is not an error.
func (d *Disks) Release(namespace, name string, uid types.UID) error {
	dir := d.VMIDir(namespace, name, uid)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("VirtualMachineInstance %s/%s (uid %s): removing %s: %w", namespace, name, uid, dir, err)
	}
	d.opts.Log.V(1).Info("released", "vmi", namespace+"/"+name, "uid", uid, "dir", dir)
	return nil
}

// Sweep releases the directory of every VMI whose UID keep rejects: what
// a Release missed (the agent stopped between a VMI's end and its
// Release, and the VMI went meanwhile). Entries that are not a VMI's
// directory are left alone.
func (d *Disks) Sweep(keep func(uid types.UID) bool) error {
	root := filepath.Join(d.opts.StateDir, "vmis")
	entries, err := os.ReadDir(root)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("VM disks: %w", err)
	}
	var errs []error
	for _, e := range entries {
		parts := strings.Split(e.Name(), "_")
		if !e.IsDir() || len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" || keep(types.UID(parts[2])) {
			continue
		}
		if err := d.Release(parts[0], parts[1], types.UID(parts[2])); err != nil {
			errs = append(errs, err)
			continue
		}
		d.opts.Log.Info("released what no VMI claims", "vmi", parts[0]+"/"+parts[1], "uid", parts[2])
	}
	return errors.Join(errs...)
}

// replaceFile writes a file through make at a temporary name of its own
// beside path, then renames it to path, so that path is never half
// written and concurrent writers do not collide (the last rename wins).
func replaceFile(path string, make func(tmp string) error) error {
	var suffix [8]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp-"+hex.EncodeToString(suffix[:]))
	if err := make(tmp); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	return nil
}

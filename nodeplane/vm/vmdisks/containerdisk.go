package vmdisks

import (
	"context"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/converge-dev/converge/api/vmisupport"
)

// checkContainerDisk refuses a containerDisk whose image reference does
// not parse, whose path leaves the image or names its root, whose pull
// policy is unknown, or whose pull secret this node cannot read.
func (d *Disks) checkContainerDisk(errs *vmisupport.FieldErrors, cd *kubevirtv1.ContainerDiskSource) {
	if cd.Image == "" {
		errs.Add("image", "required")
	} else if _, err := parseReference(cd.Image); err != nil {
		errs.Add("image", "%q: %v", cd.Image, err)
	}
	if cd.Path != "" {
		if _, err := imagePath(cd.Path); err != nil {
			errs.Add("path", "%q: %v", cd.Path, err)
		}
	}
	switch cd.ImagePullPolicy {
	case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		errs.Add("imagePullPolicy", "%q: expected Always, IfNotPresent or Never", cd.ImagePullPolicy)
	}
	if cd.ImagePullSecret != "" {
		d.needSecrets(errs, "imagePullSecret")
	}
}

// imagePath gives a containerDisk path as a clean path relative to the
// image's root ("/custom/disk.img" and "custom/disk.img" alike, as
// KubeVirt joins it to the container's root).
func imagePath(p string) (string, error) {
	clean := strings.TrimPrefix(path.Clean("/"+p), "/")
	if clean == "" {
		return "", fmt.Errorf("names the image's root: expected the disk file's path")
	}
	return clean, nil
}

// pullPolicy gives the policy of cd: its imagePullPolicy, else Always for
// the tag latest (or no tag) and IfNotPresent otherwise, as Kubernetes
// defaults a container's.
func pullPolicy(cd *kubevirtv1.ContainerDiskSource, ref name.Reference) corev1.PullPolicy {
	if cd.ImagePullPolicy != "" {
		return cd.ImagePullPolicy
	}
	if tag, ok := ref.(name.Tag); ok && tag.TagStr() == "latest" {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

// prepareContainerDisk makes the VMI's overlay at overlay on the cached
// image of v's containerDisk, pulling it as its policy says (in the
// background: a pull longer than Options.PullWait is an error wrapping
// domain.ErrVolumeNotReady, and a later call finds it further along). An
// overlay made by an earlier call stays: a VMI keeps the image it started
// with.
func (d *Disks) prepareContainerDisk(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, v kubevirtv1.Volume, overlay string) error {
	if _, err := os.Stat(overlay); err == nil {
		return nil
	}
	cd := v.ContainerDisk
	ref, err := parseReference(cd.Image)
	if err != nil {
		return fmt.Errorf("image %q: %w", cd.Image, err)
	}
	p := ""
	if cd.Path != "" {
		if p, err = imagePath(cd.Path); err != nil {
			return err
		}
	}
	kc := authn.Keychain(anonymous{})
	if cd.ImagePullSecret != "" {
		data, err := d.opts.Secrets(ctx, vmi.Namespace, cd.ImagePullSecret)
		if err != nil {
			return fmt.Errorf("imagePullSecret: Secret %s/%s: %w", vmi.Namespace, cd.ImagePullSecret, err)
		}
		if kc, err = pullSecretKeychain(data); err != nil {
			return fmt.Errorf("imagePullSecret: Secret %s/%s: %w", vmi.Namespace, cd.ImagePullSecret, err)
		}
	}
	req := pullRequest{image: cd.Image, ref: ref, path: p, policy: pullPolicy(cd, ref), keychain: kc}
	key := fmt.Sprintf("%s\x00%s\x00%s\x00%s/%s", cd.Image, p, req.policy, vmi.Namespace, cd.ImagePullSecret)
	img, err := d.pulls.wait(ctx, key, cd.Image, d.opts.PullWait, func() (cachedImage, error) {
		// the pull outlives this Prepare: bounded by PullTimeout only
		return d.cache.get(context.Background(), req)
	})
	if err != nil {
		return err
	}
	if err := d.createOverlay(ctx, img.path, img.format, overlay); err != nil {
		return fmt.Errorf("image %s (%s): overlay: %w", cd.Image, img.digest, err)
	}
	d.opts.Log.Info("containerDisk overlay", "vmi", vmi.Namespace+"/"+vmi.Name, "volume", v.Name, "image", cd.Image, "digest", img.digest, "pulled", img.pulled)
	return nil
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	uploadv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/upload/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/nodeendpoint"
	"github.com/converge-dev/converge/internal/nodeclient"
)

// uploadScheme holds the types image-upload reads and writes.
var uploadScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = cdiv1.AddToScheme(s)
	_ = uploadv1.AddToScheme(s)
	return s
}()

// imageUploadFlags are the flags of `converge image-upload dv`.
type imageUploadFlags struct {
	ns, imagePath, size, storageClass string
	proxyURL                          string
	noCreate, insecure                bool
	timeout, poll                     time.Duration
}

func newImageUpload(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image-upload",
		Short: "Upload a VM disk image into a DataVolume (virtctl image-upload)",
	}
	f := &imageUploadFlags{poll: 500 * time.Millisecond}
	dv := &cobra.Command{
		Use:   "dv NAME --image-path FILE",
		Short: "Upload FILE into the DataVolume NAME, creating it with source upload when absent",
		Long: `dv uploads a disk image (raw or qcow2; qcow2 is converted to raw on the node)
into the DataVolume NAME, as virtctl image-upload dv does:

 1. unless it exists, it creates NAME with spec.source.upload and
    spec.storage of --size (and --storage-class); --no-create refuses
    instead;
 2. it waits for phase UploadReady (the converge-node cdi-importer agent of
    the volume's node sets it once the PVC is Bound there);
 3. it creates an UploadTokenRequest (upload.cdi.kubevirt.io, served by
    converge-controller as CDI's apiserver serves it) whose answer carries
    the token (RBAC: create on uploadtokenrequests in the namespace);
 4. it streams the file, with a progress bar on a terminal and percentage
    lines otherwise, to the upload proxy at --uploadproxy-url (POST
    /v1beta1/upload, as virtctl), or without it straight to the node's
    upload server, whose address and certificate fingerprint are on the
    Node (annotations cdi.converge.dev/upload-address,
    cdi.converge.dev/upload-cert-sha256);
 5. it waits for phase Succeeded.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.imagePath == "" {
				return errors.New("--image-path: required (the disk image file to upload)")
			}
			ctx := cmd.Context()
			if f.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, f.timeout)
				defer cancel()
			}
			return runImageUpload(ctx, g, f, args[0])
		},
	}
	fl := dv.Flags()
	fl.StringVarP(&f.ns, "namespace", "n", "default", "namespace of the DataVolume")
	fl.StringVar(&f.imagePath, "image-path", "", "path of the disk image to upload (raw or qcow2)")
	fl.StringVar(&f.size, "size", "", "size of the DataVolume to create, e.g. 10Gi (required unless it exists)")
	fl.StringVar(&f.storageClass, "storage-class", "", "StorageClass of the DataVolume to create (default: the cluster's default)")
	fl.BoolVar(&f.noCreate, "no-create", false, "fail when the DataVolume does not exist instead of creating it")
	fl.StringVar(&f.proxyURL, "uploadproxy-url", "", "URL of the upload proxy (converge-controller's Service port https-uploadproxy, or CDI's cdi-uploadproxy), as virtctl's; empty: straight to the volume's node")
	fl.BoolVar(&f.insecure, "insecure", false, "accept any certificate from the upload proxy or server (skip verification: the system CAs for the proxy, the pinned fingerprint for a node)")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Minute, "give up after this long (0: no limit)")
	cmd.AddCommand(dv)
	return cmd
}

func runImageUpload(ctx context.Context, g *globals, f *imageUploadFlags, name string) error {
	file, err := os.Open(f.imagePath)
	if err != nil {
		return fmt.Errorf("--image-path: %w", err)
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("--image-path %s: expected a regular file", f.imagePath)
	}
	cfg, err := g.restConfig()
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: uploadScheme})
	if err != nil {
		return err
	}
	key := types.NamespacedName{Namespace: f.ns, Name: name}
	if err := ensureUploadDV(ctx, g, c, f, key); err != nil {
		return err
	}
	dv, err := waitDV(ctx, c, key, f.poll, func(dv *cdiv1.DataVolume) (bool, error) {
		switch dv.Status.Phase {
		case cdiv1.UploadReady:
			return true, nil
		case cdiv1.Succeeded, cdiv1.Failed:
			return false, fmt.Errorf("DataVolume %s: phase %s, expected UploadReady (already uploaded or failed: delete it to upload again)", key, dv.Status.Phase)
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("%w (waiting for UploadReady: is converge-node cdi-importer running on the volume's node?)", err)
	}
	var ep nodeendpoint.Endpoint
	if f.proxyURL == "" {
		if ep, err = uploadEndpoint(ctx, c, dv); err != nil {
			return err
		}
	}
	token, err := requestUploadToken(ctx, c, key)
	if err != nil {
		return err
	}
	fmt.Fprintf(g.stdout, "Uploading %s (%d bytes) to DataVolume %s\n", f.imagePath, st.Size(), key)
	tty := false
	if o, ok := g.stdout.(*os.File); ok {
		tty = term.IsTerminal(int(o.Fd()))
	}
	pr := &progressReader{r: file, total: st.Size(), out: g.stdout, tty: tty, start: time.Now()}
	upload := func() error {
		_, err := nodeclient.Upload(ctx, ep, token, pr, st.Size(), nodeclient.UploadOptions{Insecure: f.insecure})
		return err
	}
	if f.proxyURL != "" {
		upload = func() error { return uploadThroughProxy(ctx, f.proxyURL, token, pr, st.Size(), f.insecure) }
	}
	if err := upload(); err != nil {
		pr.end()
		return fmt.Errorf("DataVolume %s: %w", key, err)
	}
	pr.end()
	fmt.Fprintf(g.stdout, "Uploaded; waiting for DataVolume %s to succeed\n", key)
	if _, err := waitDV(ctx, c, key, f.poll, func(dv *cdiv1.DataVolume) (bool, error) {
		switch dv.Status.Phase {
		case cdiv1.Succeeded:
			return true, nil
		case cdiv1.Failed:
			msg := ""
			for _, cd := range dv.Status.Conditions {
				if cd.Type == cdiv1.DataVolumeRunning {
					msg = cd.Reason + ": " + cd.Message
				}
			}
			return false, fmt.Errorf("DataVolume %s: Failed: %s", key, msg)
		}
		return false, nil
	}); err != nil {
		return err
	}
	fmt.Fprintf(g.stdout, "DataVolume %s Succeeded\n", key)
	return nil
}

// ensureUploadDV creates key with source upload unless it exists.
func ensureUploadDV(ctx context.Context, g *globals, c client.Client, f *imageUploadFlags, key types.NamespacedName) error {
	dv := &cdiv1.DataVolume{}
	err := c.Get(ctx, key, dv)
	switch {
	case err == nil:
		if dv.Spec.Source == nil || dv.Spec.Source.Upload == nil {
			return fmt.Errorf("DataVolume %s: exists with another source than upload", key)
		}
		return nil
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("DataVolume %s: %w", key, err)
	case f.noCreate:
		return fmt.Errorf("DataVolume %s: not found, and --no-create was given", key)
	case f.size == "":
		return fmt.Errorf("DataVolume %s: not found; --size is required to create it (e.g. --size 10Gi)", key)
	}
	size, err := resource.ParseQuantity(f.size)
	if err != nil || size.Sign() <= 0 {
		return fmt.Errorf("--size %q: expected a positive quantity such as 10Gi", f.size)
	}
	dv = &cdiv1.DataVolume{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		Spec: cdiv1.DataVolumeSpec{
			Source: &cdiv1.DataVolumeSource{Upload: &cdiv1.DataVolumeSourceUpload{}},
			Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: size}}},
		},
	}
	if f.storageClass != "" {
		dv.Spec.Storage.StorageClassName = &f.storageClass
	}
	if err := c.Create(ctx, dv); err != nil {
		return fmt.Errorf("DataVolume %s: creating: %w", key, err)
	}
	fmt.Fprintf(g.stdout, "DataVolume %s created (source upload, %s)\n", key, f.size)
	return nil
}

// waitDV polls key until done says so or fails, or ctx ends.
func waitDV(ctx context.Context, c client.Client, key types.NamespacedName, poll time.Duration, done func(*cdiv1.DataVolume) (bool, error)) (*cdiv1.DataVolume, error) {
	for {
		dv := &cdiv1.DataVolume{}
		if err := c.Get(ctx, key, dv); err != nil {
			return nil, fmt.Errorf("DataVolume %s: %w", key, err)
		}
		ok, err := done(dv)
		if err != nil || ok {
			return dv, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("DataVolume %s: phase %q: %w", key, dv.Status.Phase, ctx.Err())
		case <-time.After(poll):
		}
	}
}

// uploadEndpoint follows the DataVolume's PVC to its PV and node, and reads
// that Node's upload endpoint.
func uploadEndpoint(ctx context.Context, c client.Client, dv *cdiv1.DataVolume) (nodeendpoint.Endpoint, error) {
	key := client.ObjectKeyFromObject(dv)
	pvc := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, key, pvc); err != nil {
		return nodeendpoint.Endpoint{}, fmt.Errorf("DataVolume %s: PVC: %w", key, err)
	}
	pv := &corev1.PersistentVolume{}
	if err := c.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return nodeendpoint.Endpoint{}, fmt.Errorf("DataVolume %s: PersistentVolume %q: %w", key, pvc.Spec.VolumeName, err)
	}
	nodeName := nodeclient.NodeOfPV(pv)
	if nodeName == "" {
		return nodeendpoint.Endpoint{}, fmt.Errorf("DataVolume %s: PersistentVolume %s has no node affinity; expected a node-local (hostpath) volume", key, pv.Name)
	}
	node := &corev1.Node{}
	if err := c.Get(ctx, types.NamespacedName{Name: nodeName}, node); err != nil {
		return nodeendpoint.Endpoint{}, fmt.Errorf("DataVolume %s: Node %s: %w", key, nodeName, err)
	}
	ep, err := nodeendpoint.Upload.FromNode(node)
	if err != nil {
		return nodeendpoint.Endpoint{}, fmt.Errorf("DataVolume %s: %w", key, err)
	}
	return ep, nil
}

// requestUploadToken creates an UploadTokenRequest for key through the
// aggregated API upload.cdi.kubevirt.io and gives the token its answer
// carries, as virtctl does.
func requestUploadToken(ctx context.Context, c client.Client, key types.NamespacedName) (string, error) {
	utr := &uploadv1.UploadTokenRequest{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, GenerateName: key.Name + "-upload-"},
		Spec: uploadv1.UploadTokenRequestSpec{PvcName: key.Name}}
	if err := c.Create(ctx, utr); err != nil {
		return "", fmt.Errorf("UploadTokenRequest for %s: creating: %w (is the APIService v1beta1.upload.cdi.kubevirt.io Available?)", key, err)
	}
	if utr.Status.Token == "" {
		return "", fmt.Errorf("UploadTokenRequest for %s: the answer has no status.token; expected upload.cdi.kubevirt.io served by converge-controller's cdi-apiserver role (or CDI's)", key)
	}
	return utr.Status.Token, nil
}

// progressReader counts bytes read and draws progress: a bar redrawn in
// place on a terminal, else one line per 10 %.
type progressReader struct {
	r         io.Reader
	total, n  int64
	out       io.Writer
	tty       bool
	start     time.Time
	lastTenth int
	lastDraw  time.Time
	ended     bool
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.n += int64(n)
	p.draw(false)
	return n, err
}

func (p *progressReader) draw(final bool) {
	pct := 100
	if p.total > 0 {
		pct = int(p.n * 100 / p.total)
	}
	if !p.tty {
		for t := p.lastTenth + 1; t <= pct/10; t++ {
			fmt.Fprintf(p.out, "%3d%%\n", t*10)
		}
		p.lastTenth = max(p.lastTenth, pct/10)
		return
	}
	if !final && time.Since(p.lastDraw) < 100*time.Millisecond {
		return
	}
	p.lastDraw = time.Now()
	const width = 40
	fill := width * pct / 100
	bar := make([]byte, width)
	for i := range bar {
		bar[i] = ' '
		if i < fill {
			bar[i] = '='
		}
	}
	mbs := float64(p.n) / max(time.Since(p.start).Seconds(), 1e-3) / 1e6
	fmt.Fprintf(p.out, "\r[%s] %3d%% %s / %s %.1f MB/s", bar, pct, humanBytes(p.n), humanBytes(p.total), mbs)
}

// end draws the final state and ends a terminal's bar line.
func (p *progressReader) end() {
	if p.ended {
		return
	}
	p.ended = true
	if p.tty {
		p.draw(true)
		fmt.Fprintln(p.out)
	}
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

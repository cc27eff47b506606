package uploadproxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/nodeendpoint"
	"github.com/converge-dev/converge/internal/nodeclient"
)

// endpointOf follows PVC ns/name to its PersistentVolume, the PV's node
// and that Node's upload endpoint; the error says which link is missing,
// in CDI's words for a missing PVC.
func endpointOf(ctx context.Context, r client.Reader, ns, name string) (nodeendpoint.Endpoint, error) {
	var none nodeendpoint.Endpoint
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, pvc); err != nil {
		if apierrors.IsNotFound(err) {
			return none, fmt.Errorf("rejecting Upload Request for PVC %s that doesn't exist", name)
		}
		return none, fmt.Errorf("PVC %s/%s: %w", ns, name, err)
	}
	if pvc.Spec.VolumeName == "" {
		return none, fmt.Errorf("PVC %s/%s: not bound to a volume yet; upload once the DataVolume is UploadReady", ns, name)
	}
	pv := &corev1.PersistentVolume{}
	if err := r.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return none, fmt.Errorf("PVC %s/%s: PersistentVolume %s: %w", ns, name, pvc.Spec.VolumeName, err)
	}
	nodeName := nodeclient.NodeOfPV(pv)
	if nodeName == "" {
		return none, fmt.Errorf("PVC %s/%s: PersistentVolume %s has no node affinity; expected a node-local (hostpath) volume", ns, name, pv.Name)
	}
	node := &corev1.Node{}
	if err := r.Get(ctx, types.NamespacedName{Name: nodeName}, node); err != nil {
		return none, fmt.Errorf("PVC %s/%s: Node %s: %w", ns, name, nodeName, err)
	}
	ep, err := nodeendpoint.Upload.FromNode(node)
	if err != nil {
		return none, fmt.Errorf("PVC %s/%s: %w (is converge-node cdi-importer running on %s?)", ns, name, err, nodeName)
	}
	return ep, nil
}

// forward streams body (size bytes, -1 unknown) to path at the node
// endpoint ep with the token, accepting only the node's pinned
// certificate, and copies the node's status and body back; a node that
// cannot be reached is 502.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, ep nodeendpoint.Endpoint, path, token string, body io.Reader, size int64, pvc string) {
	tr := &http.Transport{TLSClientConfig: nodeendpoint.Upload.ClientTLS(ep.CertSHA256, false), TLSHandshakeTimeout: 10 * time.Second}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, "https://"+ep.Address+path, body)
	if err != nil {
		p.refuse(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	start := time.Now()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		p.refuse(w, r, http.StatusBadGateway, fmt.Sprintf("PVC %s: upload server at %s: %v", pvc, ep.Address, err))
		return
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.WriteHeader(resp.StatusCode)
	n, _ := io.Copy(w, resp.Body)
	p.o.Log.Info("upload routed", "pvc", pvc, "node", ep.Address, "code", resp.StatusCode,
		"seconds", time.Since(start).Seconds(), "answerBytes", n, "form", strings.Contains(r.URL.Path, "form"))
}

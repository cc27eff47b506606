package virtapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/coder/websocket"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/api/nodeendpoint"
	"github.com/converge-dev/converge/internal/nodeclient"
)

// PlainStreamProtocol is the WebSocket subprotocol of a console stream,
// KubeVirt's subresources.PlainStreamProtocolName: binary messages
// carrying the console's bytes both ways.
const PlainStreamProtocol = "plain.kubevirt.io"

// console serves GET virtualmachineinstances/console as KubeVirt's
// ConsoleRequestHandler (pkg/virt-api/rest/console.go, streamer.go): it
// reads the VMI (404), checks it (validateVMIForConsole: 400 without a
// serial console or not running, 409 when Failed), dials the console
// server of the VMI's node with converge-controller's own token (400 when
// the node publishes none, as KubeVirt when it finds no virt-handler; 500
// when the server refuses or fails, as KubeVirt's dialer), and only then
// upgrades the caller's connection (subprotocol plain.kubevirt.io) and
// streams both ways until either side ends.
func (s *server) console(w http.ResponseWriter, r *http.Request, ns, name string) {
	ctx := r.Context()
	vmi, err := s.fetchVMI(ctx, ns, name)
	if err == nil {
		err = validateForConsole(vmi)
	}
	var ep nodeendpoint.Endpoint
	if err == nil {
		ep, err = s.endpoint(r, vmi)
	}
	var token string
	if err == nil && s.o.ConsoleToken != nil {
		if token, err = s.o.ConsoleToken(ctx); err != nil {
			err = apierrors.NewInternalError(err)
		}
	}
	var node io.ReadWriteCloser
	if err == nil {
		if node, err = nodeclient.DialConsole(ctx, ep, token, ns, name); err != nil {
			err = apierrors.NewInternalError(err)
		}
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	defer node.Close()
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{PlainStreamProtocol}, InsecureSkipVerify: true})
	if err != nil {
		s.o.Log.Info("console upgrade failed", "vmi", ns+"/"+name, "error", err.Error())
		return // Accept answered
	}
	s.o.Log.Info("console session opened", "vmi", ns+"/"+name, "node", vmi.Status.NodeName)
	reason := bridge(r, ws, node)
	s.o.Log.Info("console session closed", "vmi", ns+"/"+name, "reason", reason)
}

// validateForConsole is KubeVirt's validateVMIForConsole.
func validateForConsole(vmi *kubevirtv1.VirtualMachineInstance) error {
	if a := vmi.Spec.Domain.Devices.AutoattachSerialConsole; a != nil && !*a {
		return apierrors.NewBadRequest("No serial consoles are present.")
	}
	if vmi.Status.Phase == kubevirtv1.Failed {
		return apierrors.NewConflict(vmiResource, vmi.Name, fmt.Errorf("VMI is in failed status"))
	}
	if vmi.Status.Phase != kubevirtv1.Running {
		return apierrors.NewBadRequest("VMI is not running")
	}
	return nil
}

// endpoint gives the console endpoint the VMI's Node publishes.
func (s *server) endpoint(r *http.Request, vmi *kubevirtv1.VirtualMachineInstance) (nodeendpoint.Endpoint, error) {
	node := &corev1.Node{}
	if err := s.o.Client.Get(r.Context(), client.ObjectKey{Name: vmi.Status.NodeName}, node); err != nil {
		return nodeendpoint.Endpoint{}, apierrors.NewBadRequest(fmt.Sprintf("Node %s of VirtualMachineInstance %s/%s: %v", vmi.Status.NodeName, vmi.Namespace, vmi.Name, err))
	}
	ep, err := nodeendpoint.Console.FromNode(node)
	if err != nil {
		return nodeendpoint.Endpoint{}, apierrors.NewBadRequest(err.Error())
	}
	return ep, nil
}

// bridge copies the node's console to the caller and the caller's input to
// the node until either ends, and says which. The end of the console (the
// domain stopped) closes the caller's WebSocket normally, as the node's
// server closes it.
func bridge(r *http.Request, ws *websocket.Conn, node io.ReadWriteCloser) string {
	caller := websocket.NetConn(r.Context(), ws, websocket.MessageBinary)
	out := make(chan error, 1)
	go func() {
		_, err := io.Copy(caller, node)
		out <- err
	}()
	in := make(chan error, 1)
	go func() {
		_, err := io.Copy(node, caller)
		in <- err
	}()
	select {
	case err := <-out:
		code, reason := websocket.StatusNormalClosure, "console ended"
		if err != nil {
			code, reason = websocket.StatusInternalError, truncate("console failed: "+err.Error(), 120)
		}
		_ = ws.Close(code, reason)
		_ = node.Close()
		<-in
		return reason
	case err := <-in:
		_ = node.Close()
		<-out
		_ = ws.CloseNow()
		if err != nil && websocket.CloseStatus(err) == -1 && !errors.Is(err, io.EOF) {
			return "caller connection: " + err.Error()
		}
		return "caller closed"
	}
}

// truncate keeps a close reason within the 123 bytes a close frame allows.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

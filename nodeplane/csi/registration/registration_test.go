package registration

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// kubelet plays the kubelet's plugin watcher side of the registration
// protocol (a unit-test peer: the real kubelet is exercised on the real
// cluster): it dials the registration socket.
func kubelet(t *testing.T, socket string) registerapi.RegistrationClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return registerapi.NewRegistrationClient(conn)
}

// start runs Serve in the background and gives its result channel.
func start(t *testing.T, ctx context.Context, o Options) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, o) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if st, err := os.Stat(o.Socket); err == nil && st.Mode().Type() == os.ModeSocket {
			return done
		}
		select {
		case err := <-done:
			t.Fatalf("Serve ended before listening: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no registration socket after 10 s")
		}
	}
}

// TestRegistration: GetInfo gives what the kubelet needs, a registered
// status keeps serving, a refusal ends Serve with the kubelet's error
// (ErrRefused), and the socket is gone.
func TestRegistration(t *testing.T) {
	kubeletDir := t.TempDir()
	o := DefaultOptions("hostpath.csi.kubevirt.io", kubeletDir)
	if o.Socket != filepath.Join(kubeletDir, "plugins_registry", "hostpath.csi.kubevirt.io-reg.sock") ||
		o.Endpoint != filepath.Join(kubeletDir, "plugins", "hostpath.csi.kubevirt.io", "csi.sock") {
		t.Fatalf("DefaultOptions paths: %s, %s", o.Socket, o.Endpoint)
	}
	done := start(t, context.Background(), o)
	if st, err := os.Stat(o.Socket); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("registration socket mode %v (%v), want 0600", st.Mode(), err)
	}
	k := kubelet(t, o.Socket)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := k.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.GetType() != registerapi.CSIPlugin || info.GetName() != o.DriverName || info.GetEndpoint() != o.Endpoint || !slices.Equal(info.GetSupportedVersions(), []string{"1.0.0"}) {
		t.Errorf("GetInfo = %v", info)
	}
	if _, err := k.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("Serve ended after a successful registration: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if _, err := k.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: false, Error: "RegisterPlugin error -- plugin validation failed"}); err != nil {
		t.Fatalf("NotifyRegistrationStatus(false): %v (the kubelet must get its reply)", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "plugin validation failed") || !strings.Contains(err.Error(), o.DriverName) {
			t.Fatalf("Serve after a refusal: %v, want ErrRefused with the kubelet's error and the driver", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve still runs 10 s after the kubelet refused the registration")
	}
	if _, err := os.Lstat(o.Socket); !os.IsNotExist(err) {
		t.Errorf("registration socket left after Serve: %v", err)
	}
}

// TestServeStops: a stale socket is replaced, cancelling ends Serve with
// nil and removes the socket; a non-socket file there and bad options are
// refused.
func TestServeStops(t *testing.T) {
	o := DefaultOptions("d.example.com", t.TempDir())
	os.MkdirAll(filepath.Dir(o.Socket), 0o750)
	stale, err := net.Listen("unix", o.Socket)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := start(t, ctx, o)
	if _, err := kubelet(t, o.Socket).GetInfo(context.Background(), &registerapi.InfoRequest{}); err != nil {
		t.Fatalf("GetInfo after replacing a stale socket: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve after cancel: %v", err)
	}
	if _, err := os.Lstat(o.Socket); !os.IsNotExist(err) {
		t.Errorf("registration socket left after cancel: %v", err)
	}

	if err := os.WriteFile(o.Socket, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Serve(context.Background(), o); err == nil || !strings.Contains(err.Error(), "exists and is not a socket") {
		t.Errorf("Serve over a regular file: %v", err)
	}
	bad := o
	bad.Endpoint, bad.DriverName = "csi.sock", ""
	if err := Serve(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "driver name: required") || !strings.Contains(err.Error(), `(CSI endpoint) "csi.sock"`) {
		t.Errorf("Serve with bad options: %v", err)
	}
}

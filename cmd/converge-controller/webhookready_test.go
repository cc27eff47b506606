package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-dev/converge/internal/testing/controlplane"
)

// TestWebhookReachable: the gate holds while the Service has no
// EndpointSlice, or only endpoints not ready (the pod not Ready yet), and
// an EndpointSlice of another Service does not count; it opens once an
// endpoint is ready, and stays open after the endpoint goes.
func TestWebhookReachable(t *testing.T) {
	c := controlplane.StartForTest(t)
	ctx := context.Background()
	svc := types.NamespacedName{Namespace: "default", Name: "converge-controller"}
	gate := webhookReachable(c, svc, 50*time.Millisecond)
	held := func(what string) {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		if err := gate(cctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: gate gave %v, want it held until the deadline", what, err)
		}
	}
	slice := func(service, name string, ready bool) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: svc.Namespace, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: service}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
			Ports:       []discoveryv1.EndpointPort{{Port: ptr(int32(4343)), Protocol: ptr(corev1.ProtocolTCP)}},
		}
	}

	held("no EndpointSlice")
	if err := c.Create(ctx, slice("other", "other-abc", true)); err != nil {
		t.Fatal(err)
	}
	held("a ready endpoint of another Service only")
	mine := slice(svc.Name, "converge-controller-abc", false)
	if err := c.Create(ctx, mine); err != nil {
		t.Fatal(err)
	}
	held("an endpoint not ready")
	ready := true
	mine.Endpoints[0].Conditions.Ready = &ready
	if err := c.Update(ctx, mine); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := gate(cctx); err != nil {
		t.Fatalf("a ready endpoint: gate gave %v, want nil", err)
	}
	if err := c.Delete(ctx, mine); err != nil {
		t.Fatal(err)
	}
	cctx2, cancel2 := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel2()
	if err := gate(cctx2); err != nil {
		t.Errorf("once open: gate gave %v, want nil at once", err)
	}
}

func ptr[T any](v T) *T { return &v }

// failingReader is a client.Reader whose every List fails, as a client
// whose rate limiter refuses a wait past the deadline.
type failingReader struct{ client.Reader }

func (failingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("rate: Wait(n=1) would exceed context deadline")
}

// TestWebhookReachableReadErrors: a failed read holds the gate (read again
// at the next tick) and, at the deadline, the error wraps ctx's and names
// the last read error.
func TestWebhookReachableReadErrors(t *testing.T) {
	gate := webhookReachable(failingReader{}, types.NamespacedName{Namespace: "default", Name: "converge-controller"}, 10*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := gate(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "would exceed context deadline") {
		t.Fatalf("gate gave %v, want it held until the deadline, naming the last read error", err)
	}
}

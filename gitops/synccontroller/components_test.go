package synccontroller

import (
	"testing"

	"github.com/converge-dev/converge/reconciler"
)

func TestWaitingMessage(t *testing.T) {
	c := func(name string, h reconciler.Health) reconciler.ComponentHealth {
		return reconciler.ComponentHealth{Name: name, Health: h, Message: "why " + name}
	}
	for _, tc := range []struct {
		name string
		in   []reconciler.ComponentHealth
		want string
	}{
		{"progressing and waiting", []reconciler.ComponentHealth{c("hco", reconciler.Healthy), c("cdi", reconciler.Progressing),
			c("virt", reconciler.Progressing), c("hpp", reconciler.Waiting), c("ssp", reconciler.Waiting)},
			"cdi, virt not healthy yet; hpp, ssp held back until their dependencies are healthy (status.components and converge tree say why)"},
		{"failed first", []reconciler.ComponentHealth{c("hpp", reconciler.Waiting), c("cdi", reconciler.Failed)},
			"cdi failed; hpp held back until their dependencies are healthy (status.components and converge tree say why)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := waitingMessage(&reconciler.Result{Components: tc.in}); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

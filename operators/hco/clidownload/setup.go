package clidownload

import (
	"errors"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/converge-dev/converge/internal/webhook"
)

// SetupOptions configure Setup.
type SetupOptions struct {
	// Dir holds the binaries (New). Required.
	Dir string
	// BindAddress is where the server listens (default ":8446",
	// converge-controller's --cli-download-bind-address).
	BindAddress string
	// Certs is the certificate Manager whose certificate the server
	// serves (converge-controller's webhook certificate). Required.
	Certs *webhook.Manager
}

// Setup reads Dir (New; its error is Setup's) and adds the server to mgr
// on every replica: once the certificate Manager has a certificate it
// serves HTTPS on BindAddress until the manager stops
// (webhook.Manager.AddServer). Dir stays open for the process's life.
func Setup(mgr ctrl.Manager, o SetupOptions) error {
	if o.Dir == "" || o.Certs == nil {
		return errors.New("clidownload: SetupOptions.Dir and Certs are required")
	}
	if o.BindAddress == "" {
		o.BindAddress = ":8446"
	}
	s, err := New(o.Dir)
	if err != nil {
		return err
	}
	mgr.GetLogger().WithName("cli-download").Info("serving the converge CLI", "dir", o.Dir, "binaries", len(s.paths))
	return o.Certs.AddServer(mgr, "cli-download", o.BindAddress, s, nil)
}

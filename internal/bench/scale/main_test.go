package scale

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

func TestMain(m *testing.M) {
	log.SetLogger(logr.Discard())
	code := m.Run()
	if controllerExe.dir != "" {
		_ = os.RemoveAll(controllerExe.dir)
	}
	os.Exit(code)
}

package faults_test

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// LogEnv names a file for the controllers' logs (debug level); without
// it they are discarded (the failures the faults cause are the tests'
// subject, reported by them).
const LogEnv = "CONVERGE_FAULTS_LOG"

func TestMain(m *testing.M) {
	l := logr.Discard()
	if p := os.Getenv(LogEnv); p != "" {
		f, err := os.Create(p)
		if err != nil {
			panic(err)
		}
		l = zap.New(zap.WriteTo(f), zap.UseDevMode(true), zap.Level(zapcore.DebugLevel))
	}
	ctrllog.SetLogger(l)
	os.Exit(m.Run())
}

package cli_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/converge-dev/converge/internal/cli"
)

// TestCommandsStopOnCancel: vet and render end as soon as their context
// ends (cli.Main cancels it on SIGINT and SIGTERM), also while CUE
// evaluates, which takes no context.
func TestCommandsStopOnCancel(t *testing.T) {
	example := filepath.Join("..", "..", "testdata", "example")
	for _, args := range [][]string{{"vet", example}, {"render", example}} {
		t.Run(args[0], func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			var out, errb bytes.Buffer
			done := make(chan int, 1)
			go func() { done <- cli.RunContext(ctx, args, &out, &errb) }()
			time.Sleep(20 * time.Millisecond) // loading or evaluating by now
			cancel()
			select {
			case code := <-done:
				if code != 1 || !strings.Contains(errb.String(), "stopped: context canceled") {
					t.Fatalf("exit %d, stderr %q: want 1 and the command stopped", code, errb.String())
				}
				if out.Len() > 0 {
					t.Errorf("a stopped %s printed %q", args[0], out.String())
				}
			case <-time.After(time.Minute):
				t.Fatalf("converge %s still running a minute after its context ended", args[0])
			}
		})
	}
}

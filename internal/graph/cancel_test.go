package graph_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/converge-dev/converge/internal/graph"
)

// TestRenderContext: a render or vet whose context ends returns at once
// with the context's error, whether it was waiting for the engine or
// evaluating; the engine renders again afterwards.
func TestRenderContext(t *testing.T) {
	e := newEngine(t)
	cfg, err := e.LoadConfig(filepath.Join("..", "..", "testdata", "example"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.RenderContext(context.Background(), cfg, graph.Inputs{}); err != nil {
		t.Fatalf("render: %v", err) // warm: the CRDs are read once
	}

	t.Run("cancelled before", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := e.RenderContext(ctx, cfg, graph.Inputs{}); !errors.Is(err, context.Canceled) {
			t.Fatalf("render: %v, want context.Canceled", err)
		}
		if err := e.VetContext(ctx, cfg); !errors.Is(err, context.Canceled) {
			t.Fatalf("vet: %v, want context.Canceled", err)
		}
	})

	// The engine is busy (its lock held, as by a long render of another
	// Sync): a render with a deadline gives up waiting.
	t.Run("deadline while waiting for the engine", func(t *testing.T) {
		unlock := e.Lock()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := e.RenderContext(ctx, cfg, graph.Inputs{})
		unlock()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("render: %v, want context.DeadlineExceeded", err)
		}
	})

	// Cancelled mid-evaluation: RenderContext returns before the
	// evaluation ends; that one finishes in the background.
	t.Run("cancelled while evaluating", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := e.RenderContext(ctx, cfg, graph.Inputs{})
			done <- err
		}()
		time.Sleep(5 * time.Millisecond)
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("render: %v, want nil (it finished first) or context.Canceled", err)
		}
	})

	if _, err := e.RenderContext(context.Background(), cfg, graph.Inputs{}); err != nil {
		t.Fatalf("render after the cancelled ones: %v", err)
	}
}

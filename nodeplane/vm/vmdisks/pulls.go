package vmdisks

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/converge-dev/converge/nodeplane/vm/domain"
)

// pulls runs containerDisk pulls in the background, so that a long pull
// holds neither the agent's pass nor the other VMIs of the node: Prepare
// waits for a pull up to Options.PullWait, then reports the volume not
// ready (domain.ErrVolumeNotReady) and finds the pull further along, or
// done, when it is called again. One pull runs per image, path, policy
// and pull secret; its result is kept until a Prepare takes it.
type pulls struct {
	mu       sync.Mutex
	inflight map[string]*pull
}

type pull struct {
	started time.Time
	done    chan struct{}
	img     cachedImage
	err     error
}

// wait gives the result of the pull of key, started with run when none
// is in flight, once it is done; when it is still running after wait, an
// error wrapping domain.ErrVolumeNotReady.
func (p *pulls) wait(ctx context.Context, key, image string, wait time.Duration, run func() (cachedImage, error)) (cachedImage, error) {
	p.mu.Lock()
	if p.inflight == nil {
		p.inflight = map[string]*pull{}
	}
	pl, ok := p.inflight[key]
	if !ok {
		pl = &pull{started: time.Now(), done: make(chan struct{})}
		p.inflight[key] = pl
		go func() {
			pl.img, pl.err = run()
			close(pl.done)
		}()
	}
	p.mu.Unlock()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-pl.done:
		p.mu.Lock()
		if p.inflight[key] == pl {
			delete(p.inflight, key) // taken: the next Prepare asks the cache again
		}
		p.mu.Unlock()
		return pl.img, pl.err
	case <-timer.C:
		return cachedImage{}, fmt.Errorf("image %s: pulling (for %s): %w", image, time.Since(pl.started).Round(time.Second), domain.ErrVolumeNotReady)
	case <-ctx.Done():
		return cachedImage{}, fmt.Errorf("image %s: %w", image, ctx.Err())
	}
}

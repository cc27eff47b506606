package uploadtoken

import (
	"context"
	"crypto/ecdsa"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Keeper gives the signing key of Options, ensured (EnsureKeys) on the
// first call that succeeds and cached after it; a failed call is retried
// by the next one. Safe for concurrent use.
type Keeper struct {
	// Client reads and creates the Secret and the ConfigMap; uncached (a
	// cached Get would watch every Secret in the cluster).
	Client  client.Client
	Options Options

	mu  sync.Mutex
	key *ecdsa.PrivateKey
}

// Key gives the signing key, or EnsureKeys' error.
func (k *Keeper) Key(ctx context.Context) (*ecdsa.PrivateKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.key != nil {
		return k.key, nil
	}
	key, err := EnsureKeys(ctx, k.Client, k.Options)
	if err != nil {
		return nil, err
	}
	k.key = key
	return key, nil
}

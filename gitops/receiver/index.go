package receiver

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Path returns the URL path of the hook of the Sync key whose receiver
// token is token: PathPrefix followed by the lower-case hex SHA-256 of
// token, name and namespace concatenated, the formula of Flux's
// Receiver (notification-controller api/v1 Receiver.GetWebhookPath:
// sha256(token+name+namespace) under "/hook/"). Without the token the
// path cannot be guessed; it changes when the token does.
func Path(key types.NamespacedName, token []byte) string {
	h := sha256.New()
	h.Write(token)
	h.Write([]byte(key.Name))
	h.Write([]byte(key.Namespace))
	return PathPrefix + hex.EncodeToString(h.Sum(nil))
}

// Index maps hook paths to the Sync each addresses and the token that
// authenticates its requests, so that the Handler finds both without a
// call to the API server. The Sync controller keeps it (Set on every
// reconcile of a Sync with spec.receiver, Delete when the receiver, its
// token or the Sync goes). The zero value is empty and ready; it is safe
// for concurrent use.
type Index struct {
	mu     sync.RWMutex
	byPath map[string]entry
	byKey  map[types.NamespacedName]string
}

// entry is what a path leads to.
type entry struct {
	key   types.NamespacedName
	token []byte
}

// Set makes Path(key, token) lead to key, authenticated with token, and
// drops the path key had before (a rotated token retires the old path at
// once). It returns the path. Two Syncs whose token, name and namespace
// concatenate to the same bytes would share a path (Flux's formula has
// no separator): the second one is refused. An empty token is refused
// too. A refused key is left without a path.
func (x *Index) Set(key types.NamespacedName, token []byte) (string, error) {
	path := Path(key, token)
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(token) == 0 {
		x.deleteLocked(key)
		return "", fmt.Errorf("Sync %s: receiver token is empty", key)
	}
	if x.byPath == nil {
		x.byPath = map[string]entry{}
		x.byKey = map[types.NamespacedName]string{}
	}
	if e, ok := x.byPath[path]; ok && e.key != key {
		x.deleteLocked(key)
		return "", fmt.Errorf("Sync %s: its receiver token gives the hook path of another Sync (token, name and namespace concatenate the same): choose another token", key)
	}
	x.deleteLocked(key)
	x.byPath[path] = entry{key: key, token: append([]byte(nil), token...)}
	x.byKey[key] = path
	return path, nil
}

// Delete forgets the path of key, if any.
func (x *Index) Delete(key types.NamespacedName) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.deleteLocked(key)
}

func (x *Index) deleteLocked(key types.NamespacedName) {
	if p, ok := x.byKey[key]; ok {
		delete(x.byPath, p)
		delete(x.byKey, key)
	}
}

// lookup gives the entry of a request path.
func (x *Index) lookup(path string) (entry, bool) {
	if x == nil {
		return entry{}, false
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	e, ok := x.byPath[path]
	return e, ok
}

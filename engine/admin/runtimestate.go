// The runtime state file: the bans and revocations written through the API
// on a node without a cluster, kept across restarts beside admin.state.

package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/loopgate/loopgate/engine/confstore"
)

// runtimeState is the file's JSON: each ban's prefix and each revocation's
// key (hex) with the unix nanoseconds it lapses, 0 for good.
type runtimeState struct {
	Bans        map[string]int64 `json:"bans"`
	Revocations map[string]int64 `json:"revocations"`
}

// runtimeStore keeps a node's bans and revocations in a file, replaced
// atomically (confstore.WriteAtomic) after every write through the API.
// Sets the cluster shares are Redis's to keep, and left out. Safe for
// concurrent use.
type runtimeStore struct {
	path              string
	bans, revocations localSet // nil: not kept here (none, or the cluster's)

	mu sync.Mutex // serialises saves, so the last write's set is the one on disk
}

// RuntimePath is the runtime state file of the state file statePath:
// beside it, "<state>.runtime.json"; "" for no state file.
func RuntimePath(statePath string) string {
	if statePath == "" {
		return ""
	}
	return statePath + ".runtime.json"
}

// load puts the file's sets back: the bans and revocations that have not
// lapsed. A missing file holds none; one that does not decode is an error.
func (r *runtimeStore) load(now time.Time) error {
	data, err := os.ReadFile(r.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("admin runtime state: %w", err)
	}
	var st runtimeState
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("admin runtime state: %s does not decode (%v); remove it to start without the bans and revocations it kept", r.path, err)
	}
	for _, s := range []struct {
		set  localSet
		held map[string]int64
	}{{r.bans, st.Bans}, {r.revocations, st.Revocations}} {
		if s.set == nil {
			continue
		}
		live := make(map[string]int64, len(s.held))
		for m, until := range s.held {
			if until == 0 || until > now.UnixNano() {
				live[m] = until
			}
		}
		s.set.replace(live)
	}
	return nil
}

// save writes the sets as they are now.
func (r *runtimeStore) save() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var st runtimeState
	if r.bans != nil {
		st.Bans = r.bans.snapshot()
	}
	if r.revocations != nil {
		st.Revocations = r.revocations.snapshot()
	}
	data, err := json.Marshal(&st)
	if err != nil {
		return err
	}
	return confstore.WriteAtomic(r.path, data)
}

// newRuntimeStore is the store of rt's sets at path, but for those the
// cluster k shares; nil when there is nothing to keep.
func newRuntimeStore(path string, rt Runtime, k *Cluster) *runtimeStore {
	if path == "" || rt == nil {
		return nil
	}
	r := &runtimeStore{path: path}
	if !k.SharesBans() {
		r.bans = banCopy{rt.Bans()}
	}
	if !k.SharesRevocations() {
		r.revocations = revocationCopy{rt.RevocationSet()}
	}
	if r.bans == nil && r.revocations == nil {
		return nil
	}
	return r
}

// The per-loop verification cache: verified JWTs by token hash,
// bounded, evicting the oldest insertion first.

package auth

// cache holds one loop's verified tokens. Only that loop touches it, so it
// has no locks.
//
// Eviction is first-in first-out: ring records keys in insertion order and,
// once the cache is full, a new key takes the slot of the oldest, whose
// entry is deleted. Refreshing an existing key (after its entry expired)
// keeps its slot. Every key in entries occupies exactly one ring slot, so
// len(entries) <= size always. FIFO rather than LRU keeps the hit path free
// of writes; a hot token evicted early costs one re-verification.
type cache struct {
	entries map[[16]byte]cacheEntry
	ring    [][16]byte // keys in insertion order, len <= size
	next    int        // once the ring is full, the slot to reuse next (the oldest)
	size    int
	_       [64]byte // keep loops' caches on separate cache lines
}

type cacheEntry struct {
	v       *verified // shared by every hit: read-only
	revoke  [16]byte  // the token's revocation key (jwtRevocationKey), checked on every hit
	expires int64     // monotonic ns (Exchange.Now): min(verified + TTL, token exp + leeway)
}

func newCache(size int) *cache {
	return &cache{entries: make(map[[16]byte]cacheEntry, min(size, 1024)), size: size}
}

// put stores or refreshes key, evicting the oldest key when full.
func (c *cache) put(key [16]byte, e cacheEntry) {
	if _, ok := c.entries[key]; ok {
		c.entries[key] = e
		return
	}
	if len(c.ring) < c.size {
		c.ring = append(c.ring, key)
	} else {
		delete(c.entries, c.ring[c.next])
		c.ring[c.next] = key
		c.next = (c.next + 1) % c.size
	}
	c.entries[key] = e
}

package cas

import (
	"container/list"
	"sync"
)

// DefaultCacheBytes bounds the verified-object cache of NewBadger.
const DefaultCacheBytes = 32 << 20

// entryOverhead is charged per cached object on top of its bytes (map slot,
// list element, entry), so that many tiny objects still respect the bound.
const entryOverhead = 128

// cache is a byte-bounded LRU of objects that have already been verified
// (re-hashed) once, safe for concurrent use. Objects are shared, never
// copied: callers must not modify them.
//
// Deletion is fenced by an epoch: a reader notes the epoch before it reads
// the backend and add refuses the object if a remove ran in between, so an
// object deleted while being read is not brought back into the cache (where
// Has would report it present and Put would then skip writing it).
type cache struct {
	mu    sync.Mutex
	max   int64
	used  int64
	epoch uint64
	lru   list.List // of *cacheEntry, most recently used at the front
	byKey map[Hash]*list.Element
}

type cacheEntry struct {
	h    Hash
	data []byte
}

func newCache(maxBytes int64) *cache {
	return &cache{max: maxBytes, byKey: make(map[Hash]*list.Element)}
}

func cost(data []byte) int64 { return int64(len(data)) + entryOverhead }

// get returns a cached object and marks it recently used.
func (c *cache) get(h Hash) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[h]
	if !ok {
		return nil, false
	}
	c.lru.MoveToFront(el)
	return el.Value.(*cacheEntry).data, true
}

// contains reports whether h is cached without changing its recency.
func (c *cache) contains(h Hash) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.byKey[h]
	return ok
}

// currentEpoch is read before a backend read whose result goes to add.
func (c *cache) currentEpoch() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch
}

// add caches a verified object read at epoch, evicting the least recently
// used ones to stay within max. An object larger than a quarter of the cache
// is not cached, so one big read cannot flush everything else.
func (c *cache) add(h Hash, data []byte, epoch uint64) {
	n := cost(data)
	c.mu.Lock()
	defer c.mu.Unlock()
	if epoch != c.epoch || n > c.max/4 {
		return
	}
	if el, ok := c.byKey[h]; ok {
		c.lru.MoveToFront(el)
		return
	}
	for c.used+n > c.max {
		c.evict(c.lru.Back())
	}
	c.byKey[h] = c.lru.PushFront(&cacheEntry{h: h, data: data})
	c.used += n
}

// remove drops the objects and advances the epoch (see the type comment).
func (c *cache) remove(hs []Hash) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	for _, h := range hs {
		if el, ok := c.byKey[h]; ok {
			c.evict(el)
		}
	}
}

func (c *cache) evict(el *list.Element) {
	e := c.lru.Remove(el).(*cacheEntry)
	delete(c.byKey, e.h)
	c.used -= cost(e.data)
}

// size returns the number of cached objects and the bytes charged for them.
func (c *cache) size() (int, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byKey), c.used
}

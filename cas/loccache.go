package cas

import (
	"hash/crc32"
	"sync"
)

// locCacheEntries bounds the remembered locations: 2 GiB of 64 KiB chunks,
// about 5 MiB of memory.
const locCacheEntries = 1 << 15

// pageSize is the unit of the remembered checksums: the kernel reads a
// file in pages, so a random 4 KiB read of a chunk read before costs a
// 4 KiB pread and one page's CRC, not the whole chunk.
const pageSize = 4096

// locEntry is where a verified object's bytes are and the CRC-32C of each
// pageSize piece of them (the last one shorter).
type locEntry struct {
	loc  Loc
	crcs []uint32
}

// pageCRCs returns the CRC-32C of each pageSize piece of data.
func pageCRCs(data []byte) []uint32 {
	crcs := make([]uint32, 0, (len(data)+pageSize-1)/pageSize)
	for p := 0; p < len(data); p += pageSize {
		crcs = append(crcs, crc32.Checksum(data[p:min(p+pageSize, len(data))], castagnoli))
	}
	return crcs
}

// check reports whether p, the object's bytes from off (a multiple of
// pageSize) to a page boundary or its end, has the remembered CRCs.
func (e *locEntry) check(p []byte, off int) bool {
	if off%pageSize != 0 || off+len(p) > int(e.loc.Raw) ||
		(len(p)%pageSize != 0 && off+len(p) != int(e.loc.Raw)) ||
		len(e.crcs) != (int(e.loc.Raw)+pageSize-1)/pageSize {
		return false
	}
	for i, pg := off/pageSize, 0; pg < len(p); i, pg = i+1, pg+pageSize {
		if crc32.Checksum(p[pg:min(pg+pageSize, len(p))], castagnoli) != e.crcs[i] {
			return false
		}
	}
	return true
}

// locCache remembers the locations of objects read and verified, safe for
// concurrent use. When full it drops an arbitrary entry (Go's map
// iteration starts at a random place), which unlike LRU keeps part of a
// cyclic scan bigger than the cache.
//
// A delta's base, once the next version is remembered on top of it, is
// only a link that reads of the chain walk (undeltaVia needs its location,
// not its CRCs): demote moves it to links, a second map of compact
// locations (some 110 bytes an entry against some 300), bounded by
// maxLinks (twice max: some 7 MiB when full). A random writer's 1 GiB file is 16,384 chains of up to
// MaxDataChain links: at 32k entries with CRCs the links did not fit,
// and each missing link cost an index lookup on every read of its chain.
type locCache struct {
	mu       sync.Mutex
	max      int
	maxLinks int
	epoch    uint64
	m        map[Hash]locEntry
	links    map[Hash]linkLoc
}

// linkLoc is a Loc without its pack fields (a pack member is not
// demoted).
type linkLoc struct {
	base   Hash
	seg    uint64
	off    int64
	stored uint32
	raw    uint32
	depth  uint16
	comp   byte
}

func (l linkLoc) loc() Loc {
	return Loc{Seg: l.seg, Off: l.off, Stored: l.stored, Raw: l.raw, Comp: l.comp, Base: l.base, Depth: l.depth}
}

func newLocCache(max int) *locCache {
	return &locCache{max: max, maxLinks: 2 * max, m: make(map[Hash]locEntry), links: make(map[Hash]linkLoc)}
}

// link returns h's remembered location, with CRCs or demoted.
func (c *locCache) link(h Hash) (Loc, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[h]; ok {
		return e.loc, true
	}
	l, ok := c.links[h]
	return l.loc(), ok
}

// demote moves h's entry to the links (see locCache), unless forget ran
// since epoch was read.
func (c *locCache) demote(h Hash, epoch uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[h]
	if !ok || epoch != c.epoch || e.loc.Comp == compPack || c.maxLinks <= 0 {
		return
	}
	delete(c.m, h)
	if len(c.links) >= c.maxLinks {
		for k := range c.links {
			delete(c.links, k)
			break
		}
	}
	l := e.loc
	c.links[h] = linkLoc{base: l.Base, seg: l.Seg, off: l.Off, stored: l.Stored, raw: l.Raw, depth: l.Depth, comp: l.Comp}
}

func (c *locCache) get(h Hash) (locEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[h]
	return e, ok
}

// currentEpoch is read before the lookup whose result goes to add.
func (c *locCache) currentEpoch() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch
}

// add remembers e for h unless forget ran since epoch was read.
func (c *locCache) add(h Hash, e locEntry, epoch uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if epoch != c.epoch || c.max <= 0 {
		return
	}
	if _, ok := c.m[h]; !ok && len(c.m) >= c.max {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[h] = e
	delete(c.links, h)
}

// forget drops the entries of hs and advances the epoch.
func (c *locCache) forget(hs []Hash) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	for _, h := range hs {
		delete(c.m, h)
		delete(c.links, h)
	}
}

// dropChain drops the entries of h and of the delta chain below it, down
// to and including its whole bottom, as far as they are remembered; it
// returns how many it dropped. Unlike forget it leaves the epoch alone:
// the objects are still stored, and a read that remembers one of them
// meanwhile is right to. Dropping is only ever a lost hint.
func (c *locCache) dropChain(h Hash) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for range maxDepth {
		var l Loc
		if e, ok := c.m[h]; ok {
			l = e.loc
			delete(c.m, h)
		} else if k, ok := c.links[h]; ok {
			l = k.loc()
			delete(c.links, h)
		} else {
			break
		}
		n++
		if l.Comp != compDelta {
			break
		}
		h = l.Base
	}
	return n
}

func (c *locCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

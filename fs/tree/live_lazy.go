package tree

import "github.com/reynfs/reynfs/cas"

// A lazy store (a clone that left file data on its remote: cas.Fetcher)
// fetches a chunk it lacks on the read that needs it, over the network.
// Reads fetch outside the tree's lock (ReadVec, prepare), but a few
// operations read chunks under the write lock: a truncation inside a
// chunk, a hole punched inside one, copy_file_range's source. For a lazy
// store, warm reads those chunks first, under the read lock only to find
// them, so that the locked read finds them stored and no FUSE handler of
// another file waits for the network. A chunk that fails to fetch is
// read again under the lock, where the store answers the failure it
// remembers (replica.Lazy.FailFor) at once.

// lazyStore is cas.Badger's Lazy.
type lazyStore interface{ Lazy() bool }

// warm fetches the committed chunks of ino that [off, off+n) touches
// (edge: only the partial chunks at either end) when the store is lazy.
func (l *Live) warm(ino uint64, off, n uint64, edge bool) {
	lz, ok := l.stage.Store.(lazyStore)
	if !ok || !lz.Lazy() || n == 0 {
		return
	}
	var hs []cas.Hash
	l.mu.RLock()
	if nd := l.t.Node(ino); nd != nil && nd.IsReg() {
		first, last := off/cas.ChunkSize, (off+n-1)/cas.ChunkSize
		for idx := first; idx <= last && idx < uint64(len(nd.chunks)); idx++ {
			if edge && idx != first && idx != last {
				continue
			}
			if _, pend := nd.pending[idx]; !pend && !nd.chunks[idx].IsZero() {
				hs = append(hs, nd.chunks[idx])
			}
		}
	}
	l.mu.RUnlock()
	for _, h := range hs {
		_, _ = l.stage.Store.Get(h) // a failure is reported by the locked read
	}
}

package tree

import (
	"bytes"
	"container/list"
	"sync"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// staging serves the chunks of records that are enqueued but not yet
// committed: the tree names them as soon as the record is applied, and a
// read must find them before the committer has written them to the store.
//
// It also keeps the most recently committed chunks, up to recentMax bytes:
// a small write lands in the chunk a moment ago's flush stored more often
// than not (a log appended and closed line by line, a database rewriting
// its hot pages, fio's fsync'd 4 KiB appends), and its read-modify-write
// then needs no store read and no re-hash (cas.Badger copies and verifies
// every object it reads from Badger). The bytes were hashed here, so they
// are the object's bytes by construction.
type staging struct {
	cas.Store
	mu    sync.Mutex
	blobs map[cas.Hash]stagedBlob

	recent      map[cas.Hash]*list.Element // of *recentBlob, in order
	order       list.List                  // newest first
	recentBytes int
	recentMax   int // recentBytes' bound (tests lower it)

	// bufs pools the chunk buffers GetOnceInto reads into (*[]byte of
	// cas.ChunkSize); recycling counts the recycleAfter calls not yet
	// run (tests wait for them).
	bufs      sync.Pool
	recycling sync.WaitGroup
}

type stagedBlob struct {
	data []byte
	refs int
	lent bool // data is a write's request buffer (lend): Get copies it
	// logged is the commit of lent bytes given back once its frame was in
	// the log (giveBack), data nil: a read waits for its index and then
	// reads the store.
	logged *journal.Pending
}

type recentBlob struct {
	hash cas.Hash
	data []byte
}

// recentMax bounds the committed chunks staging keeps, counted by the
// capacity of their buffers: 128 full chunks.
const recentMax = 8 << 20

func newStaging(s cas.Store) *staging {
	return &staging{Store: s, blobs: map[cas.Hash]stagedBlob{}, recent: map[cas.Hash]*list.Element{}, recentMax: recentMax}
}

func (s *staging) Get(h cas.Hash) ([]byte, error) {
	return s.get(h, false)
}

// GetOnce is Get for a read-modify-write (cas.OnceGetter): what it reads
// from the store is not cached there.
func (s *staging) GetOnce(h cas.Hash) ([]byte, error) {
	return s.get(h, true)
}

func (s *staging) get(h cas.Hash, once bool) ([]byte, error) {
	s.mu.Lock()
	if b, ok := s.blobs[h]; ok {
		if b.data == nil && b.logged != nil {
			// Lent bytes given back before their index: wait
			// for it, then read the store.
			s.mu.Unlock()
			if err := b.logged.Wait(); err != nil {
				return nil, err
			}
			return s.fromStore(h, once)
		}
		data := b.data
		if b.lent {
			// Copied under s.mu: giveBack, which the write
			// waits for before its buffer is reused, takes it.
			data = bytes.Clone(data)
		}
		s.mu.Unlock()
		return data, nil
	}
	if el, ok := s.recent[h]; ok {
		s.order.MoveToFront(el)
		s.mu.Unlock()
		return el.Value.(*recentBlob).data, nil
	}
	s.mu.Unlock()
	return s.fromStore(h, once)
}

// GetOnceInto is GetOnce for a read-modify-write that keeps the bytes as
// its slot's base (Tree.setBase): a chunk read from the store goes into a
// buffer of the staging's pool (cas.IntoGetter), which saves a random
// writer a fresh, cleared 64 KiB buffer per write. pooled reports such a
// buffer: the caller then owns it and gives it back with recycle once,
// when nothing reads it any more (see Tree.setBase for the tree's rule).
// A pooled buffer never given back is only garbage for the collector.
func (s *staging) GetOnceInto(h cas.Hash) (data []byte, pooled bool, err error) {
	g, ok := s.Store.(cas.IntoGetter)
	if !ok {
		data, err = s.GetOnce(h)
		return data, false, err
	}
	s.mu.Lock()
	_, held := s.blobs[h]
	_, recent := s.recent[h]
	s.mu.Unlock()
	if held || recent {
		data, err = s.GetOnce(h)
		return data, false, err
	}
	bp, _ := s.bufs.Get().(*[]byte)
	if bp == nil {
		buf := make([]byte, cas.ChunkSize)
		bp = &buf
	}
	data, into, err := g.GetOnceInto(h, *bp)
	if err != nil || !into {
		s.bufs.Put(bp)
		return data, false, err
	}
	return data, true, nil
}

// recycle gives pooled buffers (GetOnceInto) back to the pool; the
// caller owns them and nothing reads them any more.
func (s *staging) recycle(bufs ...[]byte) {
	for _, b := range bufs {
		if cap(b) != cas.ChunkSize {
			continue // not one of the pool's
		}
		b = b[:cas.ChunkSize]
		s.bufs.Put(&b)
	}
}

// recycleAfter is recycle once p is done: the commit p stands for reads
// its blobs' BaseData until then. With p nil it recycles at once.
func (s *staging) recycleAfter(bufs [][]byte, p *journal.Pending) {
	if len(bufs) == 0 {
		return
	}
	if p == nil {
		s.recycle(bufs...)
		return
	}
	s.recycling.Add(1)
	p.OnDone(func(error) { // done either way: the committer reads them no more
		s.recycle(bufs...)
		s.recycling.Done()
	})
}

func (s *staging) fromStore(h cas.Hash, once bool) ([]byte, error) {
	if g, ok := s.Store.(cas.OnceGetter); ok && once {
		return g.GetOnce(h)
	}
	return s.Store.Get(h)
}

// hold keeps blobs readable until p has committed (or failed), and then
// among the recent ones if it committed. What staging does once a commit
// ends runs on the goroutine that ends it (journal.Pending.OnDone), under
// s.mu alone: s.mu is a leaf lock, never held while waiting for the
// journal.
func (s *staging) hold(blobs []cas.Blob, p *journal.Pending) {
	if len(blobs) == 0 {
		return
	}
	s.mu.Lock()
	for _, b := range blobs {
		sb := s.blobs[b.Hash]
		sb.data, sb.lent = b.Data, false
		sb.refs++
		s.blobs[b.Hash] = sb
	}
	s.mu.Unlock()
	p.OnDone(func(err error) {
		committed := err == nil
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, b := range blobs {
			if sb := s.blobs[b.Hash]; sb.refs <= 1 {
				delete(s.blobs, b.Hash)
			} else {
				sb.refs--
				s.blobs[b.Hash] = sb
			}
			if committed {
				s.keepLocked(b.Hash, b.Data)
			}
		}
	})
}

// lend keeps blobs readable like hold, for a commit whose blob bytes are
// lent: the buffer of a write request, which the write waits for the
// commit's frame to release (Live.WriteAt). Until then Get returns copies
// of them, and the writer calls giveBack before it returns; they are not
// kept among the recent chunks.
func (s *staging) lend(blobs []cas.Blob) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range blobs {
		sb := s.blobs[b.Hash]
		if sb.refs == 0 || sb.lent || sb.data == nil {
			sb.data, sb.lent = b.Data, true
		}
		sb.refs++
		s.blobs[b.Hash] = sb
	}
}

// giveBack ends lend once p, the commit of blobs, has its frame in the
// log (Pending.WaitLogged): from its return staging holds no reference to
// the blobs' bytes. Until p's index is written, the store may not find
// them yet, so each entry whose bytes these were stays, without bytes: a
// read of it waits for p and then reads the store (get). An entry another
// hold still needs keeps a copy if its bytes were these. The entries go
// once p is done.
func (s *staging) giveBack(blobs []cas.Blob, p *journal.Pending) {
	s.mu.Lock()
	for _, b := range blobs {
		sb, ok := s.blobs[b.Hash]
		if !ok || !sb.lent || len(sb.data) == 0 || len(b.Data) == 0 || &sb.data[0] != &b.Data[0] {
			continue
		}
		if sb.refs <= 1 {
			sb.data, sb.lent, sb.logged = nil, false, p
		} else {
			sb.data, sb.lent = bytes.Clone(sb.data), false
		}
		s.blobs[b.Hash] = sb
	}
	s.mu.Unlock()
	p.OnDone(func(error) { s.release(blobs) })
}

// release drops one reference to each of blobs.
func (s *staging) release(blobs []cas.Blob) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range blobs {
		sb, ok := s.blobs[b.Hash]
		if !ok {
			continue
		}
		if sb.refs <= 1 {
			delete(s.blobs, b.Hash)
			continue
		}
		sb.refs--
		s.blobs[b.Hash] = sb
	}
}

// keepLocked adds a committed chunk to the recent ones, dropping the
// oldest past s.recentMax. The caller holds s.mu.
func (s *staging) keepLocked(h cas.Hash, data []byte) {
	if el, ok := s.recent[h]; ok {
		s.order.MoveToFront(el)
		return
	}
	if cap(data) > s.recentMax {
		return
	}
	s.recent[h] = s.order.PushFront(&recentBlob{hash: h, data: data})
	s.recentBytes += cap(data)
	for s.recentBytes > s.recentMax {
		old := s.order.Back()
		rb := old.Value.(*recentBlob)
		s.order.Remove(old)
		delete(s.recent, rb.hash)
		s.recentBytes -= cap(rb.data)
	}
}

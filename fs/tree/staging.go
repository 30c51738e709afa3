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

func (s *staging) fromStore(h cas.Hash, once bool) ([]byte, error) {
	if g, ok := s.Store.(cas.OnceGetter); ok && once {
		return g.GetOnce(h)
	}
	return s.Store.Get(h)
}

// hold keeps blobs readable until p has committed (or failed), and then
// among the recent ones if it committed.
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
	go func() {
		committed := p.Wait() == nil
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
	}()
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
	go func() {
		p.Wait()
		s.release(blobs)
	}()
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

package tree

import (
	"sync"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// staging serves the chunks of records that are enqueued but not yet
// committed: the tree names them as soon as the record is applied, and a
// read must find them before the committer has written them to the store.
type staging struct {
	cas.Store
	mu    sync.Mutex
	blobs map[cas.Hash]stagedBlob
}

type stagedBlob struct {
	data []byte
	refs int
}

func newStaging(s cas.Store) *staging {
	return &staging{Store: s, blobs: map[cas.Hash]stagedBlob{}}
}

func (s *staging) Get(h cas.Hash) ([]byte, error) {
	s.mu.Lock()
	b, ok := s.blobs[h]
	s.mu.Unlock()
	if ok {
		return b.data, nil
	}
	return s.Store.Get(h)
}

// hold keeps blobs readable until p has committed (or failed).
func (s *staging) hold(blobs []cas.Blob, p *journal.Pending) {
	if len(blobs) == 0 {
		return
	}
	s.mu.Lock()
	for _, b := range blobs {
		sb := s.blobs[b.Hash]
		sb.data = b.Data
		sb.refs++
		s.blobs[b.Hash] = sb
	}
	s.mu.Unlock()
	go func() {
		_ = p.Wait()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, b := range blobs {
			if sb := s.blobs[b.Hash]; sb.refs <= 1 {
				delete(s.blobs, b.Hash)
			} else {
				sb.refs--
				s.blobs[b.Hash] = sb
			}
		}
	}()
}

package tree

import (
	"bytes"
	"fmt"
	"sync"
	"syscall"
	"testing"

	"github.com/reynfs/reynfs/cas"
)

// lockProbe is a cas.Fetcher that serves objects a test removed from the
// store and notes whether the live tree's lock was held while it did.
type lockProbe struct {
	objs     *cas.Badger
	l        *Live
	data     map[cas.Hash][]byte
	mu       sync.Mutex
	fetched  int
	underLck int
}

func (p *lockProbe) Fetch(h cas.Hash) ([]byte, error) {
	d, ok := p.data[h]
	if !ok {
		return nil, fmt.Errorf("probe: %w", cas.ErrNotFound)
	}
	free := p.l.mu.TryLock()
	if free {
		p.l.mu.Unlock()
	}
	p.mu.Lock()
	p.fetched++
	if !free {
		p.underLck++
	}
	p.mu.Unlock()
	if err := p.objs.PutBatch([]cas.Blob{{Hash: h, Data: d}}); err != nil {
		return nil, err
	}
	return d, nil
}

// TestLazyFetchOutsideLock: on a lazy store, a truncation or a hole
// punched inside a chunk the store lacks, and copy_file_range from such
// chunks, fetch them before taking the tree's write lock (live_lazy.go),
// so no handler of another file waits for the network; reads and
// read-modify-writes already read outside it (ReadVec's fill, prepare).
func TestLazyFetchOutsideLock(t *testing.T) {
	for _, op := range []string{"truncate", "punch", "copy", "read", "write"} {
		t.Run(op, func(t *testing.T) {
			l, j := newTestLive(t)
			c := Caller{Pid: 1}
			st, err := l.Create(c, RootIno, "f", syscall.S_IFREG|0o644, 0)
			if err != nil {
				t.Fatal(err)
			}
			dst, err := l.Create(c, RootIno, "g", syscall.S_IFREG|0o644, 0)
			if err != nil {
				t.Fatal(err)
			}
			content := bytes.Repeat([]byte("lazy chunk "), 3*cas.ChunkSize/11)
			if _, err := l.WriteAt(c, st.Ino, NoHandle, content, 0, false); err != nil {
				t.Fatal(err)
			}
			if err := l.FlushAll(c); err != nil {
				t.Fatal(err)
			}
			if err := j.Sync(); err != nil {
				t.Fatal(err)
			}
			l.Lock()
			root, blobs, err := l.Tree().Root()
			l.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			objs := j.Objects()
			if err := objs.PutBatch(blobs); err != nil {
				t.Fatal(err)
			}
			// A second live tree over the same store, whose chunks are
			// then on the "remote" only.
			tr, err := Load(objs, root)
			if err != nil {
				t.Fatal(err)
			}
			l2 := NewLive(tr, j, 1<<20, 1<<21, func(uint64) error { return nil })
			probe := &lockProbe{objs: objs, l: l2, data: map[cas.Hash][]byte{}}
			var gone []cas.Hash
			for _, h := range tr.Node(st.Ino).chunks {
				d, err := objs.Get(h)
				if err != nil {
					t.Fatal(err)
				}
				probe.data[h] = bytes.Clone(d)
				gone = append(gone, h)
			}
			if err := objs.Delete(gone); err != nil {
				t.Fatal(err)
			}
			objs.SetFetcher(probe)
			t.Cleanup(func() { objs.SetFetcher(nil) })
			switch op {
			case "truncate":
				_, err = l2.SetAttr(c, st.Ino, SetAttrIn{Valid: SetSize, Size: cas.ChunkSize + 100})
			case "punch":
				err = l2.Fallocate(c, st.Ino, NoHandle, FallocPunchHole|FallocKeepSize, 100, 50)
			case "copy":
				_, err = l2.CopyRange(c, st.Ino, 10, dst.Ino, NoHandle, 0, 2*cas.ChunkSize)
			case "read":
				var got [][]byte
				got, _, err = l2.ReadVec(st.Ino, 5, 100, make([]byte, 100))
				if err == nil && !bytes.Equal(bytes.Join(got, nil), content[5:105]) {
					t.Errorf("read %q", bytes.Join(got, nil))
				}
			case "write":
				_, err = l2.WriteAt(c, st.Ino, NoHandle, []byte("x"), cas.ChunkSize+3, false)
			}
			if err != nil {
				t.Fatal(err)
			}
			if probe.fetched == 0 || probe.underLck != 0 {
				t.Errorf("%s: %d fetches, %d of them under the tree's lock; want some, none under it", op, probe.fetched, probe.underLck)
			}
		})
	}
}

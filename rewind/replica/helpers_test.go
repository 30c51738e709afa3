package replica

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/agents"
	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
)

// source is a workspace driven through the live tree, as the file
// system drives it, without mounting.
type source struct {
	dir  string
	j    *journal.Journal
	live *tree.Live
	rw   *rewind.Rewinder
}

var caller = tree.Caller{Pid: 9, Comm: "test"}

func newSource(t *testing.T) *source {
	t.Helper()
	s := &source{dir: filepath.Join(t.TempDir(), "db")}
	j, err := journal.Open(s.dir, journal.Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	s.j = j
	empty := tree.New(j.Objects(), 0o755, 0, 0, 1)
	root, blobs, err := empty.Root()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rewind.CommitImport(j, root, blobs, tree.RootIno+1, "import"); err != nil {
		t.Fatal(err)
	}
	tr, err := rewind.Reconstruct(j, j.Head())
	if err != nil {
		t.Fatal(err)
	}
	next := uint64(1 << 20)
	s.live = tree.NewLive(tr, j, next, next+1<<20, func(uint64) error { return nil })
	s.rw = &rewind.Rewinder{J: j, Live: s.live, Agents: agents.NewRegistry(nil)}
	return s
}

func (s *source) lookup(t *testing.T, path string) uint64 {
	t.Helper()
	ino := uint64(tree.RootIno)
	for _, name := range splitPath(path) {
		st, err := s.live.Lookup(ino, name)
		if err != nil {
			t.Fatalf("lookup %s: %v", path, err)
		}
		ino = st.Ino
	}
	return ino
}

func splitPath(p string) []string {
	var out []string
	for _, e := range bytes.Split([]byte(p), []byte("/")) {
		if len(e) > 0 {
			out = append(out, string(e))
		}
	}
	return out
}

// write creates (or overwrites from offset 0) the file at path.
func (s *source) write(t *testing.T, path string, data []byte) {
	t.Helper()
	dir, name := filepath.Split(path)
	parent := s.lookup(t, dir)
	st, err := s.live.Lookup(parent, name)
	if err != nil {
		if st, err = s.live.Create(caller, parent, name, syscall.S_IFREG|0o644, 0); err != nil {
			t.Fatal(err)
		}
		defer s.live.Forget(st.Ino, 1)
	}
	if _, err := s.live.WriteAt(caller, st.Ino, tree.NoHandle, data, 0, false); err != nil {
		t.Fatal(err)
	}
	if err := s.live.Flush(caller, st.Ino); err != nil {
		t.Fatal(err)
	}
}

func (s *source) mkdir(t *testing.T, path string) {
	t.Helper()
	dir, name := filepath.Split(path)
	st, err := s.live.Mkdir(caller, s.lookup(t, dir), name, syscall.S_IFDIR|0o755)
	if err != nil {
		t.Fatal(err)
	}
	s.live.Forget(st.Ino, 1)
}

func (s *source) unlink(t *testing.T, path string) {
	t.Helper()
	dir, name := filepath.Split(path)
	if err := s.live.Unlink(caller, s.lookup(t, dir), name); err != nil {
		t.Fatal(err)
	}
}

func (s *source) cut(t *testing.T, label string) uint64 {
	t.Helper()
	g, err := s.rw.Cut(rewind.KindManual, label)
	if err != nil {
		t.Fatal(err)
	}
	return g.Seq
}

func (s *source) sync(t *testing.T) {
	t.Helper()
	if err := s.live.FlushAll(caller); err != nil {
		t.Fatal(err)
	}
	if err := s.j.Sync(); err != nil {
		t.Fatal(err)
	}
}

func pattern(seed byte, n int) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// history builds a history with generations, a seq between them, an
// abandoned branch (by a rewind) and an agent state, and returns the
// seqs of interest by name.
func history(t *testing.T, s *source) map[string]uint64 {
	t.Helper()
	at := map[string]uint64{}
	s.mkdir(t, "src")
	s.mkdir(t, "src/deep")
	s.write(t, "src/a.txt", []byte("alpha\n"))
	s.write(t, "src/deep/big.bin", pattern(1, 3*cas.ChunkSize+100))
	if _, err := s.live.Symlink(caller, s.lookup(t, "src"), "link", "a.txt"); err != nil {
		t.Fatal(err)
	}
	if err := s.live.SetXattr(caller, s.lookup(t, "src/a.txt"), "user.k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.rw.Agents.Save(s.j, s.live, "claude", []byte(`{"turn":1}`)); err != nil {
		t.Fatal(err)
	}
	at["g-first"] = s.cut(t, "first")
	s.write(t, "src/a.txt", []byte("alpha, edited\n"))
	s.write(t, "b.txt", pattern(2, 5000))
	s.sync(t)
	at["mid"] = s.j.Head()
	s.write(t, "src/deep/big.bin", pattern(3, 70000))
	at["g-second"] = s.cut(t, "second")
	s.write(t, "doomed.txt", []byte("the future a rewind abandons\n"))
	s.unlink(t, "src/a.txt")
	s.sync(t)
	at["abandoned"] = s.j.Head()
	at["g-doomed"] = s.cut(t, "doomed")
	if _, err := s.rw.Rewind(at["g-second"], false); err != nil {
		t.Fatal(err)
	}
	s.write(t, "after.txt", []byte("after the rewind\n"))
	// A restore record names a subtree of an older state.
	if _, err := s.rw.Restore("src/deep", at["g-first"], ".reynfs"); err != nil {
		t.Fatal(err)
	}
	s.sync(t)
	at["restored"] = s.j.Head()
	at["g-after"] = s.cut(t, "after")
	s.write(t, "tail.txt", []byte("not in a generation\n"))
	s.sync(t)
	at["head"] = s.j.Head()
	return at
}

// stateRoot is the Merkle root of the state at seq x of j.
func stateRoot(t *testing.T, j *journal.Journal, x uint64) cas.Hash {
	t.Helper()
	tr, err := rewind.Reconstruct(j, x)
	if err != nil {
		t.Fatalf("reconstruct %d: %v", x, err)
	}
	h, _, err := tr.Root()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// export writes the state at seq x of j into a new directory.
func export(t *testing.T, j *journal.Journal, x uint64) string {
	t.Helper()
	tr, err := rewind.Reconstruct(j, x)
	if err != nil {
		t.Fatalf("reconstruct %d: %v", x, err)
	}
	if _, _, err := tr.Root(); err != nil { // Export takes a clean tree
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), fmt.Sprintf("export-%d", x))
	if err := rewind.Export(tr, nil, dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// sameTree fails unless a and b hold the same names, types, modes,
// symlink targets, mtimes and bytes.
func sameTree(t *testing.T, a, b string) {
	t.Helper()
	list := func(root string) map[string]string {
		out := map[string]string{}
		err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			desc := fmt.Sprintf("%v %d", fi.Mode(), fi.ModTime().UnixNano())
			switch {
			case fi.Mode()&os.ModeSymlink != 0:
				target, err := os.Readlink(p)
				if err != nil {
					return err
				}
				desc += " -> " + target
			case fi.Mode().IsRegular():
				data, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				desc += fmt.Sprintf(" %x", cas.Sum(data))
			case fi.IsDir() && rel == ".":
				desc = "root" // the export's own directory
			}
			out[rel] = desc
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	la, lb := list(a), list(b)
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range la {
			if !yield(k) {
				return
			}
		}
	}) {
		if la[k] != lb[k] {
			t.Errorf("%s: %q in %s, %q in %s", k, la[k], a, lb[k], b)
		}
		delete(lb, k)
	}
	for k := range lb {
		t.Errorf("%s: only in %s", k, b)
	}
}

// recorder logs every request to a real backend, in order, with the
// bytes of each write (the ordering invariants are checked on it).
type recorder struct {
	objstore.Backend
	mu  sync.Mutex
	log []request
	// before, when set, runs before each request is passed on.
	before func(op, key string)
	// lostReply, when set and true for a conditional write, applies it,
	// then sends it again and returns that answer: a client library
	// retrying a write whose reply was lost (ErrPrecondition).
	lostReply func(op, key string) bool
}

type request struct {
	op, key string
	data    []byte
}

func (r *recorder) note(op, key string, data []byte) {
	if r.before != nil {
		r.before(op, key)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, request{op, key, bytes.Clone(data)})
}

func (r *recorder) requests() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

func (r *recorder) Get(ctx context.Context, key string) ([]byte, objstore.Info, error) {
	r.note("get", key, nil)
	return r.Backend.Get(ctx, key)
}

func (r *recorder) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	r.note("getrange", key, nil)
	return r.Backend.GetRange(ctx, key, off, n)
}

func (r *recorder) Stat(ctx context.Context, key string) (objstore.Info, error) {
	r.note("stat", key, nil)
	return r.Backend.Stat(ctx, key)
}

func (r *recorder) Put(ctx context.Context, key string, data []byte) error {
	r.note("put", key, data)
	return r.Backend.Put(ctx, key, data)
}

func (r *recorder) PutIfAbsent(ctx context.Context, key string, data []byte) (objstore.Info, error) {
	r.note("putifabsent", key, data)
	if r.lostReply != nil && r.lostReply("putifabsent", key) {
		if _, err := r.Backend.PutIfAbsent(ctx, key, data); err != nil {
			return objstore.Info{}, err
		}
	}
	return r.Backend.PutIfAbsent(ctx, key, data)
}

func (r *recorder) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (objstore.Info, error) {
	r.note("putifmatch", key, data)
	if r.lostReply != nil && r.lostReply("putifmatch", key) {
		if _, err := r.Backend.PutIfMatch(ctx, key, data, etag); err != nil {
			return objstore.Info{}, err
		}
	}
	return r.Backend.PutIfMatch(ctx, key, data, etag)
}

func (r *recorder) List(ctx context.Context, prefix string, fn func(objstore.Info) error) error {
	r.note("list", prefix, nil)
	return r.Backend.List(ctx, prefix, fn)
}

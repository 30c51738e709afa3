package replica

// A lazy clone (clone --lazy) fetches the records, every index file and
// the tree packs whole, stores the inode objects as a clone does, and
// leaves the data objects (file chunks, agent states) on the remote. The
// store then remembers, beside its Badger directory, where each object
// it lacks is:
//
//	<store>.lazy/origin.json   {"remote": URL, "id": remote id, "packs": [id...],
//	                            "objects": N, "bytes": B}
//	<store>.lazy/index         "RFSLAZY1" count(8, BE) entry...  sorted by hash
//	<store>.lazy/order         the same entries sorted by pack, offset
//	entry: hash(32) pack(4, BE: index into packs) comp(1) off(8, BE)
//	       stored(4, BE) raw(4, BE)
//
// Nothing of it is loaded into memory: a miss is a binary search of the
// index file by pread (some 20 reads of 53 bytes at a million objects),
// and the prefetcher reads the order file front to back. The remote's
// URL is also under 'R' 'n' "origin" (clone names it so); origin.json
// keeps its own copy so that a renamed remote does not orphan the lazy
// store. When the prefetcher has stored every object, the directory is
// removed and the store is whole (no longer lazy).

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/reynfs/reynfs/cas"
)

const (
	lazyMagic     = "RFSLAZY1"
	lazyHeader    = len(lazyMagic) + 8
	lazyEntrySize = 32 + 4 + 1 + 8 + 4 + 4
	lazyOrigin    = "origin.json"
	lazyIndex     = "index"
	lazyOrder     = "order"
)

// LazyPath is where the lazy bookkeeping of the store whose Badger
// directory is dir lives (a sibling, like journal.LogPath).
func LazyPath(dir string) string { return filepath.Clean(dir) + ".lazy" }

// IsLazy reports whether the store at dir has objects on a remote.
func IsLazy(dir string) bool {
	_, err := os.Stat(filepath.Join(LazyPath(dir), lazyOrigin))
	return err == nil
}

// lazyMeta is origin.json.
type lazyMeta struct {
	Remote  string   `json:"remote"`
	ID      string   `json:"id"`
	Packs   []string `json:"packs"`
	Objects int64    `json:"objects"`
	Bytes   int64    `json:"bytes"` // stored (compressed) bytes on the remote
	// NoPrefetch: clone --prefetch=false; a mount does not prefetch
	// unless told to.
	NoPrefetch bool `json:"no_prefetch,omitempty"`
	// WS and Pinned: the workspace cloned and the packs holding the
	// objects left on the remote, which the store's pin holds against
	// remote GC (pins.go). Empty in a store cloned before pins.
	WS     string   `json:"ws,omitempty"`
	Pinned []string `json:"pinned,omitempty"`
	// PinnedAt: when the pin was last written (this machine's clock: it
	// only spaces renewals; the pin's expiry is the server's time).
	PinnedAt time.Time `json:"pinned_at,omitzero"`
}

// SetLazyPrefetch records whether a mount of the lazy store at dir
// prefetches by default.
func SetLazyPrefetch(dir string, on bool) error {
	m, err := readLazyMeta(dir)
	if err != nil {
		return err
	}
	m.NoPrefetch = !on
	return writeLazyMeta(LazyPath(dir), m)
}

// lazyEntry is one object the store lacks and where it is.
type lazyEntry struct {
	pack uint32
	e    IndexEntry
}

func (le lazyEntry) append(b []byte) []byte {
	b = append(b, le.e.Hash[:]...)
	b = binary.BigEndian.AppendUint32(b, le.pack)
	b = append(b, le.e.Comp)
	b = binary.BigEndian.AppendUint64(b, le.e.Off)
	b = binary.BigEndian.AppendUint32(b, le.e.Stored)
	return binary.BigEndian.AppendUint32(b, le.e.Raw)
}

func decodeLazyEntry(p []byte) lazyEntry {
	var le lazyEntry
	copy(le.e.Hash[:], p)
	le.pack = binary.BigEndian.Uint32(p[32:])
	le.e.Comp = p[36]
	le.e.Off = binary.BigEndian.Uint64(p[37:])
	le.e.Stored = binary.BigEndian.Uint32(p[45:])
	le.e.Raw = binary.BigEndian.Uint32(p[49:])
	return le
}

// dataPack is one data pack's index, kept by a lazy clone.
type dataPack struct {
	id string
	x  *Index
}

// writeLazy writes the lazy bookkeeping for the objects want (sorted,
// unique; every one must be in one of packs) into LazyPath(dir), the
// directory made new. It returns how many objects and stored bytes
// stay on the remote.
func writeLazy(dir, remote, id, ws string, packs []dataPack, want []cas.Hash) (objects, bytes_ int64, pinned []string, err error) {
	// Every data pack's entries, merged by hash (each index is sorted):
	// the first pack naming an object wins, as in a clone's where.
	slices.SortFunc(packs, func(a, b dataPack) int { return cmp.Compare(a.id, b.id) })
	pos := make([]int, len(packs))
	used := make([]bool, len(packs))
	entries := make([]lazyEntry, 0, len(want))
	for _, h := range want {
		found := false
		var best lazyEntry
		for p := range packs {
			es := packs[p].x.Entries
			// Advance this pack's cursor to h (want is sorted, so never back).
			i := pos[p]
			for i < len(es) && bytes.Compare(es[i].Hash[:], h[:]) < 0 {
				i++
			}
			pos[p] = i
			if !found && i < len(es) && es[i].Hash == h {
				best, found = lazyEntry{pack: uint32(p), e: es[i]}, true
			}
		}
		if !found {
			return 0, 0, nil, fmt.Errorf("%w: object %s is in no pack index", ErrCorrupt, h)
		}
		entries = append(entries, best)
		used[best.pack] = true
		objects++
		bytes_ += int64(best.e.Stored)
	}
	ld := LazyPath(dir)
	if err := os.Mkdir(ld, 0o700); err != nil {
		return 0, 0, nil, fmt.Errorf("lazy: %w", err)
	}
	if err := writeEntries(filepath.Join(ld, lazyIndex), entries); err != nil {
		return 0, 0, nil, err
	}
	slices.SortFunc(entries, func(a, b lazyEntry) int {
		return cmp.Or(cmp.Compare(a.pack, b.pack), cmp.Compare(a.e.Off, b.e.Off))
	})
	if err := writeEntries(filepath.Join(ld, lazyOrder), entries); err != nil {
		return 0, 0, nil, err
	}
	ids := make([]string, len(packs))
	for i, p := range packs {
		ids[i] = p.id
		if used[i] {
			pinned = append(pinned, p.id)
		}
	}
	meta, _ := json.Marshal(lazyMeta{Remote: remote, ID: id, Packs: ids, Objects: objects, Bytes: bytes_, WS: ws, Pinned: pinned})
	// origin.json last: a store without it is not lazy (a clone cut off
	// before it is removed whole anyway).
	if err := writeSynced(filepath.Join(ld, lazyOrigin), meta); err != nil {
		return 0, 0, nil, err
	}
	return objects, bytes_, pinned, syncDir(ld)
}

func writeEntries(path string, entries []lazyEntry) error {
	b := make([]byte, 0, lazyHeader+len(entries)*lazyEntrySize)
	b = append(b, lazyMagic...)
	b = binary.BigEndian.AppendUint64(b, uint64(len(entries)))
	for _, le := range entries {
		b = le.append(b)
	}
	return writeSynced(path, b)
}

func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("lazy: %w", err)
	}
	if _, err = f.Write(b); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("lazy: write %s: %w", path, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// entryFile is an index or order file, read by pread.
type entryFile struct {
	f *os.File
	n int64
}

func openEntries(path string) (*entryFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("lazy: %w", err)
	}
	var h [lazyHeader]byte
	if _, err := io.ReadFull(f, h[:]); err != nil || string(h[:len(lazyMagic)]) != lazyMagic {
		_ = f.Close()
		return nil, fmt.Errorf("lazy: %s: %w: header missing", path, ErrCorrupt)
	}
	n := int64(binary.BigEndian.Uint64(h[len(lazyMagic):]))
	st, err := f.Stat()
	if err != nil || n < 0 || st.Size() != int64(lazyHeader)+n*lazyEntrySize {
		_ = f.Close()
		return nil, fmt.Errorf("lazy: %s: %w: %d entries do not fit its size", path, ErrCorrupt, n)
	}
	return &entryFile{f: f, n: n}, nil
}

func (ef *entryFile) at(i int64) (lazyEntry, error) {
	var p [lazyEntrySize]byte
	if _, err := ef.f.ReadAt(p[:], int64(lazyHeader)+i*lazyEntrySize); err != nil {
		return lazyEntry{}, fmt.Errorf("lazy: read %s: %w", ef.f.Name(), err)
	}
	return decodeLazyEntry(p[:]), nil
}

// find binary-searches the (hash-sorted) file for h.
func (ef *entryFile) find(h cas.Hash) (lazyEntry, bool, error) {
	lo, hi := int64(0), ef.n
	for lo < hi {
		mid := lo + (hi-lo)/2
		le, err := ef.at(mid)
		if err != nil {
			return lazyEntry{}, false, err
		}
		switch c := bytes.Compare(le.e.Hash[:], h[:]); {
		case c == 0:
			return le, true, nil
		case c < 0:
			lo = mid + 1
		default:
			hi = mid
		}
	}
	return lazyEntry{}, false, nil
}

// findAll returns the entries of the hashes of hs the file holds. Past
// a few hundred hashes one sequential pass over the file costs less than
// a binary search each (a clone's eager .git set is ~20k hashes: ~300k
// preads searched one by one).
func (ef *entryFile) findAll(hs []cas.Hash) ([]lazyEntry, error) {
	var les []lazyEntry
	if int64(len(hs))*64 < ef.n || len(hs) < 256 {
		for _, h := range hs {
			le, ok, err := ef.find(h)
			if err != nil {
				return nil, err
			}
			if ok {
				les = append(les, le)
			}
		}
		return les, nil
	}
	want := slices.Clone(hs)
	slices.SortFunc(want, func(a, b cas.Hash) int { return bytes.Compare(a[:], b[:]) })
	want = slices.Compact(want)
	i := 0
	err := ef.each(func(le lazyEntry) error {
		for i < len(want) && bytes.Compare(want[i][:], le.e.Hash[:]) < 0 {
			i++
		}
		if i < len(want) && want[i] == le.e.Hash {
			les = append(les, le) // the first entry of a hash, as find gives
			i++
		}
		return nil
	})
	return les, err
}

// each calls fn for every entry in file order, reading 1 MiB at a time.
func (ef *entryFile) each(fn func(lazyEntry) error) error {
	const per = (1 << 20) / lazyEntrySize
	buf := make([]byte, per*lazyEntrySize)
	for i := int64(0); i < ef.n; i += per {
		k := min(per, ef.n-i)
		p := buf[:k*lazyEntrySize]
		if _, err := ef.f.ReadAt(p, int64(lazyHeader)+i*lazyEntrySize); err != nil {
			return fmt.Errorf("lazy: read %s: %w", ef.f.Name(), err)
		}
		for j := int64(0); j < k; j++ {
			if err := fn(decodeLazyEntry(p[j*lazyEntrySize:])); err != nil {
				return err
			}
		}
	}
	return nil
}

func readLazyMeta(dir string) (*lazyMeta, error) {
	b, err := os.ReadFile(filepath.Join(LazyPath(dir), lazyOrigin))
	if err != nil {
		return nil, fmt.Errorf("lazy: %w", err)
	}
	var m lazyMeta
	if err := json.Unmarshal(b, &m); err != nil || m.Remote == "" {
		return nil, fmt.Errorf("lazy: %s: %w: %v", lazyOrigin, ErrCorrupt, err)
	}
	return &m, nil
}

// leave records where the data objects the store lacks are, instead of
// fetching them (a lazy clone).
func (c *cloner) leave(data map[cas.Hash]bool) error {
	objs := c.j.Objects()
	want := make([]cas.Hash, 0, len(data))
	for h := range data {
		if ok, err := objs.Has(h); err != nil {
			return err
		} else if !ok {
			want = append(want, h)
		}
	}
	slices.SortFunc(want, func(a, b cas.Hash) int { return bytes.Compare(a[:], b[:]) })
	n, size, pinned, err := writeLazy(c.dir, c.b.String(), c.cfg.ID, c.ws, c.dataPacks, want)
	if err != nil {
		return err
	}
	c.res.RemoteObjects, c.res.RemoteBytes = n, size
	if len(pinned) == 0 {
		return nil
	}
	// The pin before anything else is written locally: a remote GC
	// from here on keeps these packs (pins.go).
	store, err := c.j.StoreID()
	if err != nil {
		return err
	}
	if err := writePin(c.ctx, c.b, c.ws, store, pinned); err != nil {
		c.res.PinError = err.Error()
		return nil
	}
	c.res.PinnedPacks, c.pinStore = len(pinned), store
	m, err := readLazyMeta(c.dir)
	if err != nil {
		return err
	}
	m.PinnedAt = pinNow()
	return writeLazyMeta(LazyPath(c.dir), m)
}

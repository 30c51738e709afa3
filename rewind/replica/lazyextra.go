package replica

// A fetch into a lazy store (a follower's steps, `reynfs fetch`) leaves
// the data objects its new records add on the remote too, as the clone
// left the others: it records where they are in
//
//	<store>.lazy/extra   entries (lazy.go's layout), appended, unsorted
//
// with their packs appended to origin.json's list (written first, by
// rename; a pack no entry names is harmless), both synced before the
// records that reach them are enqueued (invariant 1: a record is durable
// only after what it references is reachable; here, reachable on the
// remote). OpenLazy loads the extra entries into memory (a follower's
// additions: small next to the index); a miss looks in the index, then
// in them; the prefetcher fetches them after the order file; the store
// is whole only when both are stored. finMu orders an addition against
// the prefetcher's finish: once the store is whole (its .lazy directory
// gone) an addition is refused (errLazyWhole) and the fetch fetches the
// objects itself.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/reynfs/reynfs/cas"
)

const lazyExtra = "extra"

// errLazyWhole: the lazy store became whole; fetch the objects instead.
var errLazyWhole = errors.New("lazy store is whole")

// loadExtra reads the extra entries (none when the file is missing).
func (l *Lazy) loadExtra() error {
	l.extra = map[cas.Hash]lazyEntry{}
	b, err := os.ReadFile(filepath.Join(LazyPath(l.dir), lazyExtra))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("lazy: %w", err)
	}
	// A torn last entry (a crash mid-append) names no record's object:
	// the records are enqueued only after the append is synced.
	for len(b) >= lazyEntrySize {
		le := decodeLazyEntry(b[:lazyEntrySize])
		if int(le.pack) >= len(l.meta.Packs) {
			return fmt.Errorf("lazy: %s: %w: pack %d of %d", lazyExtra, ErrCorrupt, le.pack, len(l.meta.Packs))
		}
		l.extra[le.e.Hash] = le
		b = b[lazyEntrySize:]
	}
	return nil
}

// find looks h up in the index, then in the extra entries.
func (l *Lazy) find(h cas.Hash) (lazyEntry, bool, error) {
	le, ok, err := l.index.find(h)
	if err != nil || ok {
		return le, ok, err
	}
	l.xmu.RLock()
	le, ok = l.extra[h]
	l.xmu.RUnlock()
	return le, ok, nil
}

// findAll is find for many hashes: one pass over the index file (or a
// search each, for a few), then the extra entries.
func (l *Lazy) findAll(hs []cas.Hash) ([]lazyEntry, error) {
	les, err := l.index.findAll(hs)
	if err != nil {
		return nil, err
	}
	l.xmu.RLock()
	defer l.xmu.RUnlock()
	if len(l.extra) == 0 {
		return les, nil
	}
	found := make(map[cas.Hash]bool, len(les))
	for _, le := range les {
		found[le.e.Hash] = true
	}
	for _, h := range hs {
		if le, ok := l.extra[h]; ok && !found[h] {
			les, found[h] = append(les, le), true
		}
	}
	return les, nil
}

// packKey is the key of the i-th pack of origin.json.
func (l *Lazy) packKey(i uint32) (string, error) {
	l.xmu.RLock()
	defer l.xmu.RUnlock()
	if int(i) >= len(l.meta.Packs) {
		return "", fmt.Errorf("%w: lazy store names pack %d of %d", ErrCorrupt, i, len(l.meta.Packs))
	}
	return PackKey(l.meta.Packs[i]), nil
}

// extraSorted returns the extra entries by pack and offset (prefetch).
func (l *Lazy) extraSorted() []lazyEntry {
	l.xmu.RLock()
	out := make([]lazyEntry, 0, len(l.extra))
	for _, le := range l.extra {
		out = append(out, le)
	}
	l.xmu.RUnlock()
	slices.SortFunc(out, func(a, b lazyEntry) int {
		return cmp.Or(cmp.Compare(a.pack, b.pack), cmp.Compare(a.e.Off, b.e.Off))
	})
	return out
}

// addExtra records objects left on the remote, each in the pack where
// it is (pack ids).
func (l *Lazy) addExtra(objs []located) error {
	if !l.store {
		return errLazyWhole // read-only: fetch them (and keep nothing)
	}
	l.finMu.Lock()
	defer l.finMu.Unlock()
	if l.complete.Load() {
		return errLazyWhole
	}
	l.xmu.RLock()
	packs := slices.Clone(l.meta.Packs)
	l.xmu.RUnlock()
	at := map[string]uint32{}
	for i, p := range packs {
		at[p] = uint32(i)
	}
	var buf []byte
	les := make([]lazyEntry, 0, len(objs))
	for _, o := range objs {
		i, ok := at[o.pack]
		if !ok {
			i = uint32(len(packs))
			packs = append(packs, o.pack)
			at[o.pack] = i
		}
		le := lazyEntry{pack: i, e: o.e}
		les = append(les, le)
		buf = le.append(buf)
	}
	ld := LazyPath(l.dir)
	pinned := l.meta.Pinned
	if len(packs) > len(l.meta.Packs) {
		m := *l.meta
		m.Packs = packs
		// The new packs are pinned too (pins.go), from the next
		// renewal on: RenewPin below.
		pinned = append(slices.Clone(m.Pinned), packs[len(l.meta.Packs):]...)
		m.Pinned = pinned
		if err := writeLazyMeta(ld, &m); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(filepath.Join(ld, lazyExtra), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("lazy: %w", err)
	}
	if _, err = f.Write(buf); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(ld)
	}
	if err != nil {
		return fmt.Errorf("lazy: %s: %w", lazyExtra, err)
	}
	l.xmu.Lock()
	grew := len(pinned) > len(l.meta.Pinned)
	l.meta.Packs, l.meta.Pinned = packs, pinned
	for _, le := range les {
		if _, dup := l.extra[le.e.Hash]; !dup {
			l.extra[le.e.Hash] = le
			l.remainObjs.Add(1)
			l.remainBytes.Add(int64(le.e.Stored))
		}
	}
	l.xmu.Unlock()
	if grew {
		// Under finMu: the prefetcher's finish, which deletes the pin,
		// does not run meanwhile.
		ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
		err := l.renewPin(ctx, true)
		cancel()
		if err != nil {
			l.log.Warn().Err(err).Str("remote", l.meta.Remote).Msg("lazy store: could not pin the packs a fetch left on the remote; remote gc may delete them once their generations are forgotten")
		}
	}
	return nil
}

// writeLazyMeta replaces origin.json by rename.
func writeLazyMeta(ld string, m *lazyMeta) error {
	b, _ := json.Marshal(m)
	tmp, err := os.CreateTemp(ld, ".origin-*")
	if err != nil {
		return fmt.Errorf("lazy: %w", err)
	}
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(ld, lazyOrigin))
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("lazy: %w", err)
	}
	return syncDir(ld)
}

// leaveNew is objects()'s data step for a fetch into a lazy store:
// record where the objects the store lacks are instead of fetching
// them; false when the store became whole meanwhile (fetch them).
func (c *cloner) leaveNew(data map[cas.Hash]bool) (bool, error) {
	objs := c.j.Objects()
	var left []located
	for h := range data {
		if ok, err := objs.Has(h); err != nil || ok {
			if err != nil {
				return false, err
			}
			continue
		}
		if on, err := objs.OnRemote(h); err != nil || on {
			if err != nil {
				return false, err
			}
			continue
		}
		where, ok := c.where[h]
		if !ok {
			return false, fmt.Errorf("%w: object %s is in no pack index", ErrCorrupt, h)
		}
		left = append(left, where)
	}
	if len(left) == 0 {
		return true, nil
	}
	if err := c.lz.addExtra(left); errors.Is(err, errLazyWhole) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	c.res.RemoteObjects += int64(len(left))
	return true, nil
}

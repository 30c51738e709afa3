package replica

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/reynfs/reynfs/cas/objstore"
)

// A lazy clone reads its data from the remote's packs for as long as it
// is lazy, possibly from generations the writer's `forget --remote` then
// drops; remote GC would delete those packs once the grace passed, and
// the lazy store would lose what it had not fetched. So a lazy clone
// pins the data packs it reads from (its lazy bookkeeping's packs):
//
//	pins/<store id>.json  {"format":1,"ws":W,"store":ID,"host":H,
//	                       "packs":[id…],"expires":T}
//
// GC's mark reads every pin and keeps each pack an unexpired pin names
// as if something reached it (it is never condemned, and a list that
// condemned it before is revived). The clone writes its pin as soon as
// it knows the packs, before the records; every mount of the lazy store
// renews it (PinTTL from the server's time), and it is deleted when the
// store becomes whole. A pin is best effort on the lazy side (a remote
// it cannot write to, read-only credentials, is a warning, not a
// failed clone or mount); a lazy store not mounted for PinTTL loses its
// pin, and gc may then delete data it never fetched: fsck of the store
// names what is missing. A clone that takes longer than gc's grace
// (24 h) between reading HEAD and writing its pin is not covered.
const (
	pinPrefix = "pins/"
	// PinTTL: how long a lazy clone's pin holds its packs after the
	// clone or its last renewal.
	PinTTL = 30 * 24 * time.Hour
	// PinRenewAfter: a mounted lazy store renews its pin once it is
	// older than this (checked at the mount and hourly).
	PinRenewAfter = 24 * time.Hour
)

// pinNow is the clock of PinnedAt (tests move it).
var pinNow = time.Now

// Pin is one pins/<store id>.json.
type Pin struct {
	Format  int       `json:"format"`
	WS      string    `json:"ws"`
	Store   string    `json:"store"`
	Host    string    `json:"host"`
	Packs   []string  `json:"packs"`
	Expires time.Time `json:"expires"`
}

func pinKey(store string) string { return pinPrefix + store + ".json" }

// writePin writes (or renews) the pin of store on the data packs of a
// lazy clone of ws, expiring PinTTL after the server's now.
func writePin(ctx context.Context, b objstore.Backend, ws, store string, packs []string) error {
	if store == "" || strings.ContainsAny(store, "/\\") {
		return fmt.Errorf("pin: bad store id %q", store)
	}
	now, err := b.Now(ctx)
	if err != nil {
		return fmt.Errorf("pin: %w", err)
	}
	host, _ := os.Hostname()
	p := Pin{Format: Format, WS: ws, Store: store, Host: host, Packs: slices.Sorted(slices.Values(packs)),
		Expires: now.Add(PinTTL).UTC().Round(0).Truncate(time.Second)}
	if p.Packs == nil {
		p.Packs = []string{}
	}
	if err := b.Put(ctx, pinKey(store), canonical(&p)); err != nil {
		return fmt.Errorf("pin %s: %w", pinKey(store), err)
	}
	return nil
}

// dropPin deletes store's pin; one already gone is fine.
func dropPin(ctx context.Context, b objstore.Backend, store string) error {
	if err := b.Delete(ctx, pinKey(store)); err != nil && !errors.Is(err, objstore.ErrNotExist) {
		return fmt.Errorf("unpin %s: %w", pinKey(store), err)
	}
	return nil
}

// readPins reads every pin. A damaged one is an error: GC deletes
// nothing on a partial mark.
func readPins(ctx context.Context, b objstore.Backend) ([]*Pin, error) {
	var keys []string
	if err := b.List(ctx, pinPrefix, func(i objstore.Info) error {
		keys = append(keys, i.Key)
		return nil
	}); err != nil {
		return nil, err
	}
	var out []*Pin
	for _, key := range keys {
		data, _, err := b.Get(ctx, key)
		if errors.Is(err, objstore.ErrNotExist) {
			continue // its store became whole meanwhile
		}
		if err != nil {
			return nil, err
		}
		p, err := DecodePin(key, data)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// DecodePin decodes the pin stored under key exactly as writePin
// encodes it.
func DecodePin(key string, data []byte) (*Pin, error) {
	var p Pin
	if err := strict(key, data, &p); err != nil {
		return nil, err
	}
	if p.Format != Format || p.Expires.IsZero() || p.Store == "" || key != pinKey(p.Store) || CheckName(p.WS) != nil {
		return nil, fmt.Errorf("%s: %w: format %d, store %q, workspace %q, expires %s", key, ErrCorrupt, p.Format, p.Store, p.WS, p.Expires)
	}
	for _, id := range p.Packs {
		if b, err := hex.DecodeString(id); err != nil || len(b) != 32 || hex.EncodeToString(b) != id {
			return nil, fmt.Errorf("%s: %w: %q is not a pack id", key, ErrCorrupt, id)
		}
	}
	return &p, nil
}

// RenewPin writes the lazy store's pin again, PinTTL from the server's
// now, once it was written more than PinRenewAfter ago (a mount calls
// it, then hourly). A store cloned before pins, or one with nothing
// left on the remote, has none to renew.
func (l *Lazy) RenewPin(ctx context.Context) error {
	if l == nil {
		return nil
	}
	l.finMu.Lock() // not while the prefetcher's finish deletes it
	defer l.finMu.Unlock()
	return l.renewPin(ctx, false)
}

// renewPin is RenewPin with finMu held; force: whatever its age (new
// packs to pin).
func (l *Lazy) renewPin(ctx context.Context, force bool) error {
	l.xmu.RLock()
	m := *l.meta
	m.Pinned = slices.Clone(m.Pinned)
	l.xmu.RUnlock()
	if !l.store || l.Complete() || len(m.Pinned) == 0 || m.WS == "" {
		return nil
	}
	if !force && pinNow().Sub(m.PinnedAt) < PinRenewAfter {
		return nil
	}
	store, err := l.j.StoreID()
	if err != nil {
		return err
	}
	if err := writePin(ctx, l.b, m.WS, store, m.Pinned); err != nil {
		return err
	}
	m.PinnedAt = pinNow()
	l.xmu.Lock()
	defer l.xmu.Unlock()
	l.meta.PinnedAt = m.PinnedAt
	return writeLazyMeta(LazyPath(l.dir), &m)
}

// unpin deletes the pin of a store that became whole.
func (l *Lazy) unpin() error {
	if len(l.meta.Pinned) == 0 {
		return nil
	}
	store, err := l.j.StoreID()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
	defer cancel()
	return dropPin(ctx, l.b, store)
}

// pins is fsck --remote's check of every lazy clone's pin: it decodes, and while
// unexpired every pack it names is there (one gone is data a lazy clone
// may not have fetched).
func (f *fscker) pins() error {
	var keys []string
	if err := f.b.List(f.ctx, pinPrefix, func(i objstore.Info) error {
		keys = append(keys, i.Key)
		return nil
	}); err != nil {
		return err
	}
	if len(keys) == 0 {
		return nil
	}
	now, err := f.b.Now(f.ctx)
	if err != nil {
		return err
	}
	for _, key := range keys {
		data, _, err := f.b.Get(f.ctx, key)
		if errors.Is(err, objstore.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		f.r.Bytes += int64(len(data))
		p, err := DecodePin(key, data)
		if err != nil {
			f.problem("%v", err)
			continue
		}
		if now.After(p.Expires) {
			continue
		}
		for _, id := range p.Packs {
			if !f.listed[id] {
				f.problem("%s: pinned %s is gone (the lazy clone of %s on %s may lack its data)", key, PackKey(id), p.WS, p.Host)
			}
		}
	}
	return nil
}

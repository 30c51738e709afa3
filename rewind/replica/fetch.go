package replica

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/dgraph-io/badger/v4"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
)

// FetchResult says what a fetch brought.
type FetchResult struct {
	Remote  string `json:"remote"`
	WS      string `json:"ws"`
	From    uint64 `json:"from"`    // first seq fetched (0: nothing new)
	Through uint64 `json:"through"` // the remote's seq, now the store's head
	Records int    `json:"records"`
	Packs   int    `json:"packs"`
	Objects int    `json:"objects"`
	Bytes   int64  `json:"bytes"`
}

// ErrCloneAgain: the store cannot be brought up to date by a fetch (it
// was not cloned from the workspace, or the remote no longer keeps the
// seqs after the ones it holds): clone it again.
var ErrCloneAgain = errors.New("clone it again")

type fetched struct {
	Seq uint64 `json:"seq"`
}

// fetchedKey: 'R' 'f' id ws, the remote seq of ws the store holds
// (written by Clone and Fetch).
func (l local) fetchedKey(ws string) []byte { return l.key(remoteFetched, []byte(ws)...) }

func (l local) fetched(ws string) (*fetched, error) {
	var f *fetched
	err := l.j.DB().View(func(txn *badger.Txn) error {
		it, err := txn.Get(l.fetchedKey(ws))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return it.Value(func(v []byte) error {
			f = &fetched{}
			return json.Unmarshal(v, f)
		})
	})
	return f, err
}

func (l local) setFetched(ws string, seq uint64) error {
	v, _ := json.Marshal(fetched{Seq: seq})
	if err := l.j.DB().Update(func(txn *badger.Txn) error { return txn.Set(l.fetchedKey(ws), v) }); err != nil {
		return err
	}
	return l.j.DB().Sync()
}

// FetchedWorkspaces returns the workspaces of remote b the store was
// cloned (or fetched) from, with the remote seq it holds of each.
func FetchedWorkspaces(ctx context.Context, j *journal.Journal, b objstore.Backend) (map[string]uint64, error) {
	cfg, err := remoteConfig(ctx, b, false)
	if err != nil {
		return nil, err
	}
	loc, err := newLocal(j, cfg)
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	err = j.DB().View(func(txn *badger.Txn) error {
		p := loc.key(remoteFetched)
		it := txn.NewIterator(badger.IteratorOptions{Prefix: p, PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			var f fetched
			if err := it.Item().Value(func(v []byte) error { return json.Unmarshal(v, &f) }); err != nil {
				return err
			}
			out[string(it.Item().Key()[len(p):])] = f.Seq
		}
		return nil
	})
	return out, err
}

// Fetch brings the records of workspace ws that the remote holds after
// what the store holds, with the objects they reach that the store
// lacks, into the unmounted store j, which was cloned from it. A store
// with records of its own after the seq it last fetched has diverged
// and is refused (ErrDiverged): those records and the remote's would
// take the same seqs. The store's live state becomes the remote's head;
// the next mount serves it (as after an offline rewind).
func Fetch(ctx context.Context, j *journal.Journal, b objstore.Backend, ws string) (res *FetchResult, err error) {
	return FetchWith(ctx, j, b, ws, nil)
}

// FetchWith is Fetch reading the index files through ix (nil: each
// read afresh); a follower keeps one for its life.
func FetchWith(ctx context.Context, j *journal.Journal, b objstore.Backend, ws string, ix IndexCache) (res *FetchResult, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("fetch %s#%s: %w", b, ws, err)
		}
	}()
	if err := CheckName(ws); err != nil {
		return nil, fmt.Errorf("workspace %w", err)
	}
	cfg, err := remoteConfig(ctx, b, false)
	if err != nil {
		return nil, err
	}
	loc, err := newLocal(j, cfg)
	if err != nil {
		return nil, err
	}
	got, err := loc.fetched(ws)
	if err != nil {
		return nil, err
	}
	if got == nil {
		return nil, fmt.Errorf("%w: this store was not cloned from workspace %s of %s, or the remote was made again since (fetch brings a clone up to date)", ErrCloneAgain, ws, b)
	}
	h, _, err := ReadHead(ctx, b, ws)
	if err != nil {
		return nil, err
	}
	res = &FetchResult{Remote: b.String(), WS: ws, Through: h.Seq}
	if h.Seq < got.Seq {
		return nil, fmt.Errorf("%w: the remote's HEAD is at seq %d, behind the seq %d this store fetched", ErrDiverged, h.Seq, got.Seq)
	}
	head := j.Head()
	if head == got.Seq && h.Seq == got.Seq {
		_, err := pullNames(ctx, b, loc, ws, h) // a name given since
		return res, err
	}
	if start := h.Start(); start > got.Seq+1 {
		// A forget (forget.go) dropped seqs this store never fetched:
		// the records after them would replay over a gap.
		return nil, fmt.Errorf("%w: the remote keeps %s from seq %d on (forget --remote) and this store holds it only through seq %d", ErrCloneAgain, ws, start, got.Seq)
	}
	recs, n, err := segmentRecords(ctx, b, ws, h, got.Seq+1)
	if err != nil {
		return nil, err
	}
	if head > got.Seq {
		// A fetch cut off after some of its records, or records of the
		// store's own: only the first continues.
		if recs, err = pastSame(j, got.Seq, head, recs); err != nil {
			return nil, err
		}
		if recs == nil {
			return nil, fmt.Errorf("%w: the store has records of its own after seq %d, where it last matched the remote (its head is %d); `reynfs fork` makes them a workspace of their own", ErrDiverged, got.Seq, head)
		}
	}
	if len(recs) == 0 {
		if err := loc.setFetched(ws, h.Seq); err != nil {
			return nil, err
		}
		_, err := pullNames(ctx, b, loc, ws, h)
		return res, err
	}
	res.From = recs[0].Seq
	c := &cloner{ctx: ctx, b: b, ws: ws, j: j, head: h, loc: loc, res: &CloneResult{}, ixCache: ix}
	if lz := LazyOf(j); lz != nil && !lz.Complete() {
		c.lz = lz // new data stays on the remote too (lazyextra.go)
	}
	if err := c.indexes(); err != nil {
		return nil, err
	}
	if err := c.objects(recs); err != nil {
		return nil, err
	}
	// The objects are stored: now the records that name them.
	var last *journal.Pending
	for _, r := range recs {
		p := j.EnqueueAt(r, nil)
		if err := p.Refused(); err != nil {
			return nil, fmt.Errorf("seq %d: %w", r.Seq, err)
		}
		last = p
	}
	if last != nil {
		if err := last.Wait(); err != nil {
			return nil, err
		}
	}
	if err := j.Sync(); err != nil {
		return nil, err
	}
	if err := rewind.Reindex(j); err != nil {
		return nil, err
	}
	if err := loc.setFetched(ws, h.Seq); err != nil {
		return nil, err
	}
	if _, err := pullNames(ctx, b, loc, ws, h); err != nil {
		return nil, err
	}
	res.Records, res.Packs, res.Objects = len(recs), c.res.Packs, c.res.Objects
	res.Bytes = n + c.res.Bytes
	return res, nil
}

// pastSame checks that the store's records after seq from (through
// head) are the first of recs, byte for byte, and returns the rest of
// recs; nil when they differ.
func pastSame(j *journal.Journal, from, head uint64, recs []*journal.Record) ([]*journal.Record, error) {
	i := 0
	same := true
	errStop := errors.New("stop")
	err := j.Iter(from+1, func(r *journal.Record) error {
		if r.Seq > head {
			return errStop
		}
		if i >= len(recs) || recs[i].Seq != r.Seq || !bytes.Equal(journal.Encode(recs[i]), journal.Encode(r)) {
			same = false
			return errStop
		}
		i++
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return nil, err
	}
	if !same {
		return nil, nil
	}
	return recs[i:], nil
}

// IndexCache keeps decoded index files across fetches (a follower's
// steps): a fetch then lists packs/ and reads only the index files it
// has not seen.
type IndexCache map[string]*Index

// indexes reads every pack index of the remote.
func (c *cloner) indexes() error {
	var keys []string
	err := c.b.List(c.ctx, "packs/", func(i objstore.Info) error {
		if strings.HasSuffix(i.Key, ".idx") {
			keys = append(keys, i.Key)
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.where = map[cas.Hash]located{}
	for _, k := range keys {
		x := c.ixCache[k]
		if x == nil {
			data, _, err := c.b.Get(c.ctx, k)
			if err != nil {
				return err
			}
			if x, err = DecodeIndex(k, data); err != nil {
				return err
			}
			c.res.Bytes += int64(len(data))
			if c.ixCache != nil {
				c.ixCache[k] = x
			}
		}
		id := strings.TrimSuffix(strings.TrimPrefix(k, "packs/"), ".idx")
		if c.lazy && x.Kind == KindData {
			c.dataPacks = append(c.dataPacks, dataPack{id: id, x: x})
			continue
		}
		for _, e := range x.Entries {
			if _, ok := c.where[e.Hash]; !ok {
				c.where[e.Hash] = located{pack: id, e: e}
			}
		}
	}
	return nil
}

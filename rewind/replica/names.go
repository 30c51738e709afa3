package replica

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
)

// Names given with `reynfs branch NAME` travel with the workspace. A
// name is written once and never changed (rewind/branches.go), so on the
// remote it is one immutable object per name, created by PutIfAbsent:
//
//	ws/<ws>/names/<hex of the name>   {"format":1,"name":...,"seq":N,"time":...}
//
// A push writes the names of seqs its HEAD covers after that HEAD is
// written (a reader never sees a name of a seq it cannot read), and
// records each locally ('R' 'b' id ws 0 name → seq) so the next push
// asks nothing about it. A clone or fetch reads the names of the
// workspace whose seq HEAD covers and, for a fork, its parents' names
// through the fork's seq.

const remoteNames = 'b'

// RemoteName is a name object.
type RemoteName struct {
	Format int       `json:"format"`
	Name   string    `json:"name"`
	Seq    uint64    `json:"seq"`
	Time   time.Time `json:"time"`
}

func namesPrefix(ws string) string { return "ws/" + ws + "/names/" }

// NameKey is the key of workspace ws's name n.
func NameKey(ws, n string) string { return namesPrefix(ws) + hex.EncodeToString([]byte(n)) }

// DecodeName decodes a name object exactly and checks it belongs under
// key.
func DecodeName(key string, b []byte) (*RemoteName, error) {
	var n RemoteName
	if err := strict(key, b, &n); err != nil {
		return nil, err
	}
	switch {
	case n.Format != Format:
		return nil, fmt.Errorf("%s: name format %d; this reynfs reads format %d", key, n.Format, Format)
	case n.Seq == 0:
		return nil, fmt.Errorf("%s: %w: seq 0", key, ErrCorrupt)
	case !strings.HasSuffix(key, "/"+hex.EncodeToString([]byte(n.Name))):
		return nil, fmt.Errorf("%s: %w: holds the name %q, which belongs under another key", key, ErrCorrupt, n.Name)
	}
	return &n, nil
}

func (l local) nameKey(ws, n string) []byte {
	return l.key(remoteNames, append(append([]byte(ws), 0), n...)...)
}

// pushNames writes the store's names of seqs through covers that the
// store has not recorded as on the remote; it returns how many it wrote.
func pushNames(ctx context.Context, j *journal.Journal, b objstore.Backend, l local, ws string, through uint64) (int, error) {
	names, err := rewind.Names(j)
	if err != nil {
		return 0, err
	}
	sent := 0
	for _, n := range names {
		if n.Seq > through {
			continue
		}
		k := l.nameKey(ws, n.Name)
		known := false
		if err := j.DB().View(func(txn *badger.Txn) error {
			_, err := txn.Get(k)
			known = err == nil
			if errors.Is(err, badger.ErrKeyNotFound) {
				return nil
			}
			return err
		}); err != nil {
			return sent, err
		}
		if known {
			continue
		}
		rn := &RemoteName{Format: Format, Name: n.Name, Seq: n.Seq, Time: n.Time.UTC().Round(0)}
		key := NameKey(ws, n.Name)
		if _, err := b.PutIfAbsent(ctx, key, canonical(rn)); errors.Is(err, objstore.ErrPrecondition) {
			data, _, err := b.Get(ctx, key)
			if err != nil {
				return sent, err
			}
			had, err := DecodeName(key, data)
			if err != nil {
				return sent, err
			}
			if had.Seq != n.Seq {
				return sent, fmt.Errorf("%w: branch name %q is seq %d on the remote, seq %d in this store", ErrDiverged, n.Name, had.Seq, n.Seq)
			}
		} else if err != nil {
			return sent, err
		} else {
			sent++
		}
		v := binary.BigEndian.AppendUint64(nil, n.Seq)
		if err := j.DB().Update(func(txn *badger.Txn) error { return txn.Set(k, v) }); err != nil {
			return sent, err
		}
	}
	return sent, nil
}

// remoteNamesOf reads the names of workspace ws whose seq HEAD h covers
// and, for a fork, its parents' names through the fork's seq (a name of
// the fork's own wins over a parent's of the same name).
func remoteNamesOf(ctx context.Context, b objstore.Backend, ws string, h *Head) ([]RemoteName, error) {
	byName := map[string]RemoteName{}
	covered := h.Seq
	for depth := 0; ; depth++ {
		err := b.List(ctx, namesPrefix(ws), func(i objstore.Info) error {
			data, _, err := b.Get(ctx, i.Key)
			if err != nil {
				return err
			}
			n, err := DecodeName(i.Key, data)
			if err != nil {
				return err
			}
			if _, ok := byName[n.Name]; !ok && n.Seq <= covered {
				byName[n.Name] = *n
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("names of %s: %w", ws, err)
		}
		if h.Parent == nil {
			break
		}
		if depth >= 64 {
			return nil, fmt.Errorf("%w: %s: a chain of more than 64 forks", ErrCorrupt, HeadKey(ws))
		}
		covered = min(covered, h.Parent.Seq)
		ws = h.Parent.WS
		ph, _, err := ReadHead(ctx, b, ws)
		if err != nil {
			return nil, err
		}
		h = ph
	}
	out := make([]RemoteName, 0, len(byName))
	for _, n := range byName {
		out = append(out, n)
	}
	return out, nil
}

// pullNames records in the store the remote's names of ws that HEAD h
// covers, each also as on the remote (so a push does not send it back).
func pullNames(ctx context.Context, b objstore.Backend, l local, ws string, h *Head) (int, error) {
	names, err := remoteNamesOf(ctx, b, ws, h)
	if err != nil {
		return 0, err
	}
	for _, n := range names {
		if err := rewind.PutName(l.j, rewind.Name{Name: n.Name, Seq: n.Seq, Time: n.Time}); err != nil {
			return 0, err
		}
		v := binary.BigEndian.AppendUint64(nil, n.Seq)
		if err := l.j.DB().Update(func(txn *badger.Txn) error { return txn.Set(l.nameKey(ws, n.Name), v) }); err != nil {
			return 0, err
		}
	}
	return len(names), nil
}

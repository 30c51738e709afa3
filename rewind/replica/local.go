package replica

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/dgraph-io/badger/v4"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// The store's bookkeeping of its remotes, in Badger under 'R' (claimed
// in journal/doc.go), written straight into Badger like rewind's own
// indexes: losing the newest of it in a power cut only makes the next
// push send again what the remote already has.
//
//	'R' 'n' name                    remote URL (no credentials)
//	'R' 'h' id (16 B) ws            {"seq":N,"etag":"..."} last HEAD written
//	'R' 'o' id (16 B) hash (32 B)   bits: 1 the remote holds the object,
//	                                2 it holds it as an inode object
//	                                with its whole subtree
//	'R' 'f' id (16 B) ws            {"seq":N} the remote seq of ws this
//	                                store holds: set by a clone and
//	                                each fetch (fetch.go)
//	'R' 'g' id (16 B)               the remote's gc generation (gc/state)
//	                                at this store's last push (gcguard.go)
//
// id is the remote's id from reynfs-remote.json, so a remote made again
// under the same URL starts with nothing known.
const (
	prefixRemote   = 'R'
	remoteName     = 'n'
	remoteShipped  = 'h'
	remoteHolds    = 'o'
	remoteFetched  = 'f'
	remoteGCGen    = 'g'
	holdsData      = 1
	holdsTree      = 2
	maxRemoteNames = 64
)

// ErrName: a remote or workspace name that is empty, too long or has a
// character other than [A-Za-z0-9._-].
var ErrName = errors.New("bad name")

// CheckName checks a remote or workspace name.
func CheckName(name string) error {
	ok := name != "" && name != "." && name != ".." && len(name) <= maxRemoteNames
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			ok = false
		}
	}
	if !ok {
		return fmt.Errorf("%w: %q: want 1 to %d of [A-Za-z0-9._-]", ErrName, name, maxRemoteNames)
	}
	return nil
}

// local is a store's bookkeeping of one remote.
type local struct {
	j  *journal.Journal
	id []byte
}

func newLocal(j *journal.Journal, c *Config) (local, error) {
	id, err := hex.DecodeString(c.ID)
	if err != nil {
		return local{}, err
	}
	return local{j: j, id: id}, nil
}

func (l local) key(kind byte, rest ...byte) []byte {
	k := append([]byte{prefixRemote, kind}, l.id...)
	return append(k, rest...)
}

// holds returns the bits recorded for h.
func (l local) holds(h cas.Hash) (byte, error) {
	var bits byte
	err := l.j.DB().View(func(txn *badger.Txn) error {
		it, err := txn.Get(l.key(remoteHolds, h[:]...))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return it.Value(func(v []byte) error {
			if len(v) == 1 {
				bits = v[0]
			}
			return nil
		})
	})
	return bits, err
}

// markHeld records that the remote holds objs (bits as in holds), after
// the indexes naming them were written.
func (l local) markHeld(objs map[cas.Hash]byte) error {
	wb := l.j.DB().NewWriteBatch()
	defer wb.Cancel()
	for h, bits := range objs {
		if err := wb.Set(l.key(remoteHolds, h[:]...), []byte{bits}); err != nil {
			return err
		}
	}
	return wb.Flush()
}

type shipped struct {
	Seq  uint64 `json:"seq"`
	ETag string `json:"etag"`
	// Epoch: the epoch this store wrote HEAD in (0: written before
	// epochs were recorded here, i.e. 1).
	Epoch uint64 `json:"epoch,omitempty"`
}

func (l local) shipped(ws string) (*shipped, error) {
	var s *shipped
	err := l.j.DB().View(func(txn *badger.Txn) error {
		it, err := txn.Get(l.key(remoteShipped, []byte(ws)...))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return it.Value(func(v []byte) error {
			s = &shipped{}
			return json.Unmarshal(v, s)
		})
	})
	return s, err
}

func (l local) setShipped(ws string, s shipped) error {
	v, _ := json.Marshal(s)
	return l.j.DB().Update(func(txn *badger.Txn) error { return txn.Set(l.key(remoteShipped, []byte(ws)...), v) })
}

// SetRemote names a remote URL in the store (never credentials: the
// caller passes the URL a backend's String gives).
func SetRemote(j *journal.Journal, name, url string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	k := append([]byte{prefixRemote, remoteName}, name...)
	if err := j.DB().Update(func(txn *badger.Txn) error { return txn.Set(k, []byte(url)) }); err != nil {
		return fmt.Errorf("remote %s: %w", name, err)
	}
	return j.DB().Sync()
}

// RemoveRemote forgets a remote name; it reports whether it was there.
func RemoveRemote(j *journal.Journal, name string) (bool, error) {
	if err := CheckName(name); err != nil {
		return false, err
	}
	rs, err := Remotes(j)
	if err != nil {
		return false, err
	}
	if _, ok := rs[name]; !ok {
		return false, nil
	}
	k := append([]byte{prefixRemote, remoteName}, name...)
	if err := j.DB().Update(func(txn *badger.Txn) error { return txn.Delete(k) }); err != nil {
		return false, fmt.Errorf("remote %s: %w", name, err)
	}
	return true, j.DB().Sync()
}

// Remotes returns the named remotes: name → URL.
func Remotes(j *journal.Journal) (map[string]string, error) {
	out := map[string]string{}
	err := j.DB().View(func(txn *badger.Txn) error {
		p := []byte{prefixRemote, remoteName}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: p, PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			out[string(it.Item().Key()[len(p):])] = string(v)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("remotes: %w", err)
	}
	return out, nil
}

// RemoteNames returns the names of Remotes, sorted.
func RemoteNames(rs map[string]string) []string {
	var names []string
	for n := range rs {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

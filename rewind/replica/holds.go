package replica

import (
	"cmp"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/dgraph-io/badger/v4"

	"github.com/reynfs/reynfs/journal"
)

// Local retention never drops a record a remote this store writes to has
// not received. The store's bookkeeping (local.go) keys what a remote
// holds by the remote's id; 'R' 'u' id → URL (written by every session
// of a Shipper, and by push) ties an id to the URL a remote name gives,
// so the floor is held by a name and `reynfs remote remove NAME`
// releases it without asking the remote:
//
//	'R' 'u' id (16 B)               the remote's URL (as its backend
//	                                names itself: no credentials)
const remoteURL = 'u'

// setURL records the URL of this remote id.
func (l local) setURL(url string) error {
	return l.j.DB().Update(func(txn *badger.Txn) error { return txn.Set(l.key(remoteURL), []byte(url)) })
}

// FloorHold is a seq local retention must keep, and who needs it.
type FloorHold struct {
	Seq    uint64 `json:"seq"`    // the first seq that must stay
	Remote string `json:"remote"` // the remote's name
	WS     string `json:"ws"`
	// Shipped: the remote holds the workspace's seqs through it.
	Shipped uint64 `json:"shipped"`
}

// Why names the hold for retention's output.
func (h FloorHold) Why() string {
	if h.Shipped == 0 {
		return fmt.Sprintf("the remote %s (nothing of %s shipped yet)", h.Remote, h.WS)
	}
	return fmt.Sprintf("the remote %s (%s shipped through seq %d)", h.Remote, h.WS, h.Shipped)
}

// FloorHolds returns, for every named remote this store pushed to (a
// shipped seq recorded under an id whose URL a name gives), the first
// seq it has not received: shipped + 1, per workspace. Remote names
// whose URL has no record are not listed (the caller adds a hold of 1
// for a continuous sync that never shipped). It reads only the store.
func FloorHolds(j *journal.Journal) ([]FloorHold, error) {
	rs, err := Remotes(j)
	if err != nil {
		return nil, err
	}
	byURL := map[string][]string{}
	for _, n := range RemoteNames(rs) {
		byURL[rs[n]] = append(byURL[rs[n]], n)
	}
	urls := map[string]string{} // id (hex) → URL
	var out []FloorHold
	err = j.DB().View(func(txn *badger.Txn) error {
		p := []byte{prefixRemote, remoteURL}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: p, PrefetchValues: true})
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				it.Close()
				return err
			}
			urls[hex.EncodeToString(it.Item().Key()[len(p):])] = string(v)
		}
		it.Close()
		p = []byte{prefixRemote, remoteShipped}
		it = txn.NewIterator(badger.IteratorOptions{Prefix: p, PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()[len(p):]
			if len(k) < 16 {
				continue
			}
			names := byURL[urls[hex.EncodeToString(k[:16])]]
			if len(names) == 0 {
				continue // a remote no name gives any more: released
			}
			var s shipped
			if err := it.Item().Value(func(v []byte) error { return json.Unmarshal(v, &s) }); err != nil {
				return fmt.Errorf("remote bookkeeping: %w", err)
			}
			for _, n := range names {
				out = append(out, FloorHold{Seq: s.Seq + 1, Remote: n, WS: string(k[16:]), Shipped: s.Seq})
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("remote floors: %w", err)
	}
	slices.SortFunc(out, func(a, b FloorHold) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

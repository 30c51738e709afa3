package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/dgraph-io/badger/v4"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
)

// Object kinds, told apart by what references them (the bytes alone do not
// say; see cas/doc.go).
const (
	kindChunk   = "chunk"      // file data
	kindFile    = "file inode" // regular file, symlink, special file
	kindDir     = "dir inode"  // directory manifest
	kindOther   = "unreached"  // no generation reaches it
	kindUnknown = "unreached inode"
)

var kinds = []string{kindChunk, kindFile, kindDir, kindOther, kindUnknown}

// object is one stored object in the order a log would have written it:
// generation by generation, each generation's new objects in tree order.
type object struct {
	h    cas.Hash
	kind string
	gen  int // index of the first generation that reaches it (len(generations) if none)
	data []byte
	prev []byte // the previous version of the same inode, or of the chunk at the same file offset
	// depth counts the versions before this one in its line (0: the first),
	// for deltas with a bounded chain: every maxChain-th version is stored
	// whole, so a read decodes at most maxChain-1 deltas.
	depth int
	hash  int // bytes of the object that are 32-byte hashes (child or chunk names)
}

// keyClass sums Badger's keys of one prefix.
type keyClass struct {
	name            string
	keys            int64
	keyBytes, value int64
}

func prefixName(k []byte) string {
	switch {
	case bytes.HasPrefix(k, []byte("!badger!")):
		return "badger internal"
	case bytes.HasPrefix(k, []byte("m/")):
		return "m/ meta"
	}
	switch k[0] {
	case 'j':
		return "j records"
	case 'r':
		return "r reset index"
	case 'g':
		return "g generation index"
	case 'n':
		return "n branch names"
	case 'p':
		return "p restore index"
	case cas.KeyPrefix:
		return "o objects"
	case 'l':
		return "l object index"
	}
	return fmt.Sprintf("%q other", k[:1])
}

// keyClasses walks every key of the store (latest versions) by prefix,
// without reading values from the value log.
func keyClasses(db *badger.DB) ([]keyClass, error) {
	m := map[string]*keyClass{}
	err := db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			n := prefixName(item.Key())
			c := m[n]
			if c == nil {
				c = &keyClass{name: n}
				m[n] = c
			}
			c.keys++
			c.keyBytes += int64(len(item.Key()))
			c.value += item.ValueSize()
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	var out []keyClass
	for _, c := range m {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, k int) bool { return out[i].name < out[k].name })
	return out, nil
}

// loadObjects reads every object of the store: first those the generations
// reach, in generation order (cas.Walk over the roots oldest first), then
// the rest in hash order.
func loadObjects(j *journal.Journal) ([]object, int, error) {
	objs := j.Objects()
	seqs, err := rewind.Generations(j)
	if err != nil {
		return nil, 0, err
	}
	var roots []cas.Hash
	for _, s := range seqs {
		r, err := j.Get(s)
		if err != nil {
			return nil, 0, fmt.Errorf("generation %d: %w", s, err)
		}
		roots = append(roots, r.Root)
	}
	type slot struct {
		ino uint64
		idx int
	}
	var out []object
	seen := map[cas.Hash]bool{}
	lastInode := map[uint64][]byte{}
	lastChunk := map[slot][]byte{}
	inoDepth := map[uint64]int{}
	slotDepth := map[slot]int{}
	// A depth-first walk per root, oldest generation first, that skips
	// what an older generation reached (cas.Walk's order, plus which
	// generation first reached each object).
	for gi, root := range roots {
		stack := []cas.Hash{root}
		for len(stack) > 0 {
			h := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seen[h] {
				continue
			}
			seen[h] = true
			data, err := objs.Get(h)
			if err != nil {
				return nil, 0, fmt.Errorf("walk generations: %w", err)
			}
			in, err := cas.DecodeInode(data)
			if err != nil {
				return nil, 0, fmt.Errorf("walk generations: object %s: %w", h.Short(), err)
			}
			o := object{h: h, kind: kindFile, gen: gi, data: data, prev: lastInode[in.Ino], hash: 32 * (len(in.Chunks) + len(in.Entries))}
			if o.prev != nil {
				inoDepth[in.Ino]++
				o.depth = inoDepth[in.Ino]
			}
			if in.IsDir() {
				o.kind = kindDir
			}
			out = append(out, o)
			lastInode[in.Ino] = data
			for i, c := range in.Chunks {
				if c.IsZero() {
					continue
				}
				s := slot{in.Ino, i}
				cd, err := objs.Get(c)
				if err != nil {
					return nil, 0, fmt.Errorf("walk generations: %w", err)
				}
				if !seen[c] {
					seen[c] = true
					o := object{h: c, kind: kindChunk, gen: gi, data: cd, prev: lastChunk[s]}
					if o.prev != nil {
						slotDepth[s]++
						o.depth = slotDepth[s]
					}
					out = append(out, o)
				}
				lastChunk[s] = cd
			}
			for i := len(in.Entries) - 1; i >= 0; i-- { // pop in name order
				if !seen[in.Entries[i].Object] {
					stack = append(stack, in.Entries[i].Object)
				}
			}
		}
	}
	err = objs.Each(func(h cas.Hash, _ int64) error {
		if seen[h] {
			return nil
		}
		data, err := objs.Get(h)
		if err != nil {
			return err
		}
		o := object{h: h, kind: kindOther, gen: len(roots), data: data}
		if _, err := cas.DecodeInode(data); err == nil {
			o.kind = kindUnknown
		}
		out = append(out, o)
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return out, len(seqs), nil
}

// fileSizes lists the files of the store directory with their apparent
// size and the disk they occupy (sparse or preallocated files differ).
func fileSizes(w io.Writer, dir string) error {
	var paths []string
	for _, d := range []string{dir, filepath.Join(dir, "db"), journal.LogPath(filepath.Join(dir, "db"))} {
		ents, err := os.ReadDir(d)
		if err != nil {
			if d != dir && os.IsNotExist(err) {
				continue
			}
			return fmt.Errorf("list %s: %w", d, err)
		}
		for _, e := range ents {
			if e.Type().IsRegular() {
				paths = append(paths, filepath.Join(d, e.Name()))
			}
		}
	}
	fmt.Fprintf(w, "| file | apparent bytes | on disk (blocks) |\n| --- | --: | --: |\n")
	var ta, td int64
	for _, p := range paths {
		a, d, err := statSize(p)
		if err != nil {
			return err
		}
		ta += a
		td += d
		rel, _ := filepath.Rel(filepath.Dir(dir), p)
		fmt.Fprintf(w, "| %s | %d | %d |\n", rel, a, d)
	}
	fmt.Fprintf(w, "| **total** | %d (%s) | %d (%s) |\n\n", ta, mib(ta), td, mib(td))
	return nil
}

func mib(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }

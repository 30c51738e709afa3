package main

import (
	"fmt"

	"github.com/klauspost/compress/zstd"
	"io"
	"os"
	"path/filepath"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// storeOptions are the columns of the object table: one way each to store
// every object of a kind, in bytes.
var storeOptions = []string{
	"raw", "zstd fastest", "zstd default", "zstd better",
	"frames 64 KiB", "frames 1 MiB", "dict", "delta", "delta, chain < 10", "cheap delta",
}

// maxChain bounds a delta chain in the "delta, chain" column (git's
// default depth is 50; a file system reads more often than git does).
const maxChain = 10

// measureKind returns, in storeOptions order, what objs (all of one kind,
// in log order) take under each option.
func measureKind(c *compressor, objs []object) ([]int64, error) {
	res := make([]int64, len(storeOptions))
	data := make([][]byte, len(objs))
	for i, o := range objs {
		data[i] = o.data
		res[0] += int64(len(o.data))
		for k, l := range levels {
			res[1+k] += c.size(o.data, l.level)
		}
	}
	res[4] = c.packed(data, 64<<10)
	res[5] = c.packed(data, 1<<20)
	res[6] = -1 // too few objects to train a dictionary on
	if d, err := dictionary(data); err == nil {
		n, err := dictSizes(data, d)
		if err != nil {
			return nil, err
		}
		res[6] = n + int64(len(d)) // the dictionary is stored once
	}
	for _, o := range objs {
		if o.prev == nil {
			z := c.size(o.data, levels[1].level)
			res[7] += z
			res[8] += z
			res[9] += c.size(o.data, zstd.SpeedFastest)
			continue
		}
		res[9] += c.cheapDelta(o.data, o.prev)
		n, err := withDict(o.data, o.prev)
		if err != nil {
			return nil, err
		}
		res[7] += n
		if o.depth%maxChain == 0 {
			res[8] += c.size(o.data, levels[1].level)
		} else {
			res[8] += n
		}
	}
	return res, nil
}

// runStore writes the store's breakdown: its files, its Badger keys by
// prefix, and its objects by kind under each storage option.
func runStore(w io.Writer, dir string) error {
	if err := fileSizes(w, dir); err != nil {
		return err
	}
	db := dir
	if _, err := os.Stat(filepath.Join(dir, "db", "MANIFEST")); err == nil {
		db = filepath.Join(dir, "db") // the --store directory; Badger is in db/
	}
	j, err := journal.Open(db, journal.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer j.Close()
	classes, err := keyClasses(j.DB())
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "| Badger keys | keys | key bytes | value bytes |\n| --- | --: | --: | --: |\n")
	var tk, tb, tv int64
	for _, c := range classes {
		fmt.Fprintf(w, "| %s | %d | %d | %d |\n", c.name, c.keys, c.keyBytes, c.value)
		tk, tb, tv = tk+c.keys, tb+c.keyBytes, tv+c.value
	}
	fmt.Fprintf(w, "| **total** | %d | %d | %d (%s) |\n\n", tk, tb, tv, mib(tv))

	tableTable(w, j.DB())
	objs, gens, err := loadObjects(j)
	if err != nil {
		return err
	}
	if j.Objects().Logged() {
		kindOf := make(map[cas.Hash]string, len(objs))
		for _, o := range objs {
			kindOf[o.h] = o.kind
		}
		if err := logTable(w, db, kindOf); err != nil {
			return err
		}
	}
	c, err := newCompressor()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Objects (%d generations), bytes stored under each option:\n\n", gens)
	if err := objectTable(w, c, objs); err != nil {
		return err
	}
	var later []object
	for _, o := range objs {
		if o.gen > 0 && o.gen < gens {
			later = append(later, o)
		}
	}
	fmt.Fprintf(w, "\nOf them, what generations 2 to %d added (the steady state, without the first import; deltas may use older objects as bases):\n\n", gens)
	if err := objectTable(w, c, later); err != nil {
		return err
	}
	return writeTable(w, j)
}

// objectTable writes one row per kind of objs and a total: counts, bytes
// of 32-byte hashes in them, bytes Badger keeps in its value log, and the
// bytes under each of storeOptions.
func objectTable(w io.Writer, c *compressor, objs []object) error {
	fmt.Fprintf(w, "| kind | objects | hash bytes | in value log (>= 1 KiB) |")
	for _, o := range storeOptions {
		fmt.Fprintf(w, " %s |", o)
	}
	fmt.Fprintf(w, "\n| --- | --: | --: | --: |")
	for range storeOptions {
		fmt.Fprintf(w, " --: |")
	}
	fmt.Fprintln(w)
	total := make([]int64, len(storeOptions))
	var tn, th, tl int64
	for _, k := range kinds {
		var of []object
		var hb, vl int64
		for _, o := range objs {
			if o.kind == k {
				of = append(of, o)
				hb += int64(o.hash)
				if len(o.data) >= valueThreshold {
					vl += int64(len(o.data))
				}
			}
		}
		if len(of) == 0 {
			continue
		}
		res, err := measureKind(c, of)
		if err != nil {
			return fmt.Errorf("measure %s objects: %w", k, err)
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d |", k, len(of), hb, vl)
		for i, v := range res {
			fmt.Fprintf(w, " %s |", cell(v))
			if v >= 0 && total[i] >= 0 {
				total[i] += v
			} else {
				total[i] = -1
			}
		}
		fmt.Fprintln(w)
		tn, th, tl = tn+int64(len(of)), th+hb, tl+vl
	}
	fmt.Fprintf(w, "| **total** | %d | %d | %d |", tn, th, tl)
	for _, v := range total {
		fmt.Fprintf(w, " %s |", cell(v))
	}
	fmt.Fprintf(w, "\n\nraw: %s; zstd default: %s; frames 1 MiB: %s; delta: %s\n", mib(total[0]), mib(total[2]), mib(total[5]), mib(total[7]))
	return nil
}

// valueThreshold is the journal's Badger ValueThreshold (journal/open.go):
// values of at least this many bytes live in the value log, smaller ones in
// the LSM tree's tables.
const valueThreshold = 1 << 10

func cell(v int64) string {
	if v < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%d", v)
}

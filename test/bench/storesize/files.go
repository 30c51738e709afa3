package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/klauspost/compress/zstd"

	"github.com/reynfs/reynfs/cas"
)

// tally is what one chunking stores for a whole history.
type tally struct {
	chunks, raw, z, lists int64
	delta                 int64 // zstd against the previous chunk at the same offset (fixed chunks only)
	cheap                 int64 // cheapDelta against it
}

// history replays snapshots (directories, oldest first) the way a store
// sees them: a file whose bytes did not change since the previous snapshot
// stores nothing; a changed one is cut into chunks, and only chunks not
// stored before cost their bytes. Every new file version also costs its
// chunk list in its inode object (32 bytes a chunk).
type history struct {
	c        *compressor
	prev     map[string]cas.Hash     // path -> hash of its last version
	prevFix  map[string][][]byte     // path -> its last version's fixed 64 KiB chunks
	seen     []map[cas.Hash]struct{} // per splitter
	t        []tally
	versions int64
	logical  int64
}

func newHistory(c *compressor) *history {
	h := &history{c: c, prev: map[string]cas.Hash{}, prevFix: map[string][][]byte{},
		seen: make([]map[cas.Hash]struct{}, len(splitters)), t: make([]tally, len(splitters))}
	for i := range h.seen {
		h.seen[i] = map[cas.Hash]struct{}{}
	}
	return h
}

// add takes one snapshot directory.
func (h *history) add(dir string) error {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("walk %s: %w", dir, err)
	}
	sort.Strings(paths)
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("read snapshot file: %w", err)
		}
		rel, _ := filepath.Rel(dir, p)
		if err := h.file(rel, data); err != nil {
			return err
		}
	}
	return nil
}

func (h *history) file(rel string, data []byte) error {
	sum := cas.Sum(data)
	if old, ok := h.prev[rel]; ok && old == sum {
		return nil
	}
	h.prev[rel] = sum
	h.versions++
	h.logical += int64(len(data))
	for i, s := range splitters {
		chunks, err := s.split(data)
		if err != nil {
			return err
		}
		t := &h.t[i]
		t.lists += 32 * int64(len(chunks))
		for k, ch := range chunks {
			hc := cas.Sum(ch)
			if _, ok := h.seen[i][hc]; ok {
				continue
			}
			h.seen[i][hc] = struct{}{}
			t.chunks++
			t.raw += int64(len(ch))
			z := h.c.size(ch, zstd.SpeedDefault)
			t.z += z
			if i != 0 {
				continue
			}
			// fixed 64 KiB: also a delta against the chunk that held
			// this offset in the file's previous version
			if old := h.prevFix[rel]; k < len(old) {
				d, err := withDict(ch, old[k])
				if err != nil {
					return err
				}
				t.delta += d
				t.cheap += min(z, h.c.cheapDelta(ch, old[k]))
			} else {
				t.delta += z
				t.cheap += z
			}
		}
		if i == 0 {
			h.prevFix[rel] = chunks
		}
	}
	return nil
}

// runFiles replays one history and writes its table.
func runFiles(w io.Writer, name string, snaps []string) error {
	c, err := newCompressor()
	if err != nil {
		return err
	}
	h := newHistory(c)
	for _, s := range snaps {
		if err := h.add(s); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "History %s: %d snapshots, %d file versions stored, %d bytes (%s) of them\n\n",
		name, len(snaps), h.versions, h.logical, mib(h.logical))
	fmt.Fprintf(w, "| chunking | new chunks | chunk bytes raw | zstd default | chunk lists | raw + lists | zstd + lists |\n")
	fmt.Fprintf(w, "| --- | --: | --: | --: | --: | --: | --: |\n")
	for i, s := range splitters {
		t := h.t[i]
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %d |\n", s.name, t.chunks, t.raw, t.z, t.lists, t.raw+t.lists, t.z+t.lists)
	}
	t := h.t[0]
	fmt.Fprintf(w, "| %s + delta to previous chunk at offset | %d | %d | %d | %d | %d | %d |\n",
		splitters[0].name, t.chunks, t.raw, t.delta, t.lists, t.raw+t.lists, t.delta+t.lists)
	fmt.Fprintf(w, "| %s + cheap delta to it | %d | %d | %d | %d | %d | %d |\n\n",
		splitters[0].name, t.chunks, t.raw, t.cheap, t.lists, t.raw+t.lists, t.cheap+t.lists)
	return nil
}

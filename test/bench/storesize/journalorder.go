package main

import (
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
)

// writeTally is what the chunks that data records introduced would take if
// the write path compressed them as it stores them.
type writeTally struct {
	chunks, raw, zFastest, delta int64
	cheap                        int64 // cheapDelta to the slot's previous chunk, unbounded chains
	based                        int64 // chunks that had an older chunk in their slot
}

// writePath replays the journal's data records in seq order, the order the
// write path stored their chunks, including the versions no generation
// reaches (written and replaced between two checkpoints: the fine
// retention window keeps them). Each new chunk costs either zstd fastest
// alone or a zstd delta against the chunk that last held the same slot
// (inode, chunk index), which is what a read-modify-write of that slot has
// in hand; chains are bounded at maxChain like the "delta, chain" column.
func writePath(j *journal.Journal) (writeTally, error) {
	type slot struct {
		ino uint64
		idx uint64
	}
	objs := j.Objects()
	c, err := newCompressor()
	if err != nil {
		return writeTally{}, err
	}
	var t writeTally
	last := map[slot]cas.Hash{}
	depth := map[slot]int{}
	done := map[cas.Hash]bool{}
	// The first generation (the import) holds the chunks the first writes
	// to each file replace.
	if seqs, err := rewind.Generations(j); err == nil && len(seqs) > 0 {
		g, err := j.Get(seqs[0])
		if err != nil {
			return writeTally{}, err
		}
		err = cas.Walk(objs, []cas.Hash{g.Root}, func(_ cas.Hash, in *cas.Inode) error {
			if in != nil {
				for i, h := range in.Chunks {
					last[slot{in.Ino, uint64(i)}] = h
				}
			}
			return nil
		})
		if err != nil {
			return writeTally{}, err
		}
	}
	err = j.Iter(1, func(r *journal.Record) error {
		if r.Op != journal.OpData {
			return nil
		}
		for _, ch := range r.Chunks {
			s := slot{r.Ino, ch.Index}
			base, had := last[s]
			last[s] = ch.Hash
			if ch.Hash.IsZero() || done[ch.Hash] {
				continue
			}
			done[ch.Hash] = true
			data, err := objs.Get(ch.Hash)
			if err != nil {
				return err
			}
			t.chunks++
			t.raw += int64(len(data))
			z := c.size(data, zstd.SpeedFastest)
			t.zFastest += z
			if !had || base.IsZero() {
				t.delta += z
				t.cheap += z
				continue
			}
			bd, err := objs.Get(base)
			if err != nil {
				return err
			}
			t.cheap += c.cheapDelta(data, bd)
			if depth[s]+1 >= maxChain {
				depth[s] = 0
				t.delta += z
				continue
			}
			d, err := withDict(data, bd)
			if err != nil {
				return err
			}
			depth[s]++
			t.based++
			t.delta += min(d, z)
		}
		return nil
	})
	if err != nil {
		return writeTally{}, fmt.Errorf("replay data records: %w", err)
	}
	return t, nil
}

func writeTable(w io.Writer, j *journal.Journal) error {
	t, err := writePath(j)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nChunks the data records introduced, in journal order (the write path's view; import's chunks are not among them):\n\n")
	fmt.Fprintf(w, "| chunks | with an older chunk in their slot | raw | zstd fastest | delta to the slot's previous chunk, chain < %d | cheap delta to it |\n| --: | --: | --: | --: | --: | --: |\n", maxChain)
	fmt.Fprintf(w, "| %d | %d | %d | %d | %d | %d |\n", t.chunks, t.based, t.raw, t.zFastest, t.delta, t.cheap)
	return nil
}

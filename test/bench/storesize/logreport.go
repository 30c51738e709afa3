package main

import (
	"fmt"
	"io"
	"sort"

	"github.com/dgraph-io/badger/v4"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
)

// logRow sums the log's entries of one class: how many, the bytes of
// their headers (kind, name, lengths) and of their data.
type logRow struct {
	n, head, data int64
}

// logTable writes what the segment log's bytes are (store format 2 and
// later): segment and frame headers, each object kind's blob and delta
// entries (headers and stored bytes apart), and the key writes by prefix.
// kindOf names an object's kind from the generations' walk.
func logTable(w io.Writer, dir string, kindOf map[cas.Hash]string) error {
	rows := map[string]*logRow{}
	add := func(name string, head, data int) {
		r := rows[name]
		if r == nil {
			r = &logRow{}
			rows[name] = r
		}
		r.n++
		r.head += int64(head)
		r.data += int64(data)
	}
	err := cas.LogEntries(journal.LogPath(dir), func(e cas.LogEntry) error {
		switch e.Kind {
		case 'H':
			add("segment headers", e.Head, 0)
		case 'F':
			add("frame headers", e.Head, 0)
		case 'T':
			add("past the last frame", 0, e.Data)
		case 'b', 'c', 'D':
			k, ok := kindOf[e.Hash]
			if !ok {
				k = kindOther
			}
			form := "whole, raw"
			switch {
			case e.Kind == 'D':
				form = "delta"
			case e.Comp != 0:
				form = "whole, zstd"
			}
			if e.Kind == 'b' {
				form += ", named"
			}
			add(k+", "+form, e.Head, e.Data)
		case 'P':
			// A pack's bytes go to its objects' kinds in proportion to
			// their lengths; its header to the first one's.
			var raw int
			for _, n := range e.MemberRaw {
				raw += n
			}
			for i, h := range e.Members {
				k, ok := kindOf[h]
				if !ok {
					k = kindOther
				}
				head := 0
				if i == 0 {
					head = e.Head
				}
				add(k+", packed", head, e.Data*e.MemberRaw[i]/max(raw, 1))
			}
		case 's', 'd':
			name := "key write " + prefixName(e.Key)
			if e.Kind == 'd' {
				name = "key delete " + prefixName(e.Key)
			}
			add(name, e.Head, e.Data)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("scan log: %w", err)
	}
	names := make([]string, 0, len(rows))
	for n := range rows {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(w, "| segment log | entries | header bytes | data bytes | total |\n| --- | --: | --: | --: | --: |\n")
	var t logRow
	for _, n := range names {
		r := rows[n]
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d |\n", n, r.n, r.head, r.data, r.head+r.data)
		t.n, t.head, t.data = t.n+r.n, t.head+r.head, t.data+r.data
	}
	fmt.Fprintf(w, "| **total** | %d | %d | %d | %d (%s) |\n\n", t.n, t.head, t.data, t.head+t.data, mib(t.head+t.data))
	return nil
}

// tableTable writes Badger's tables: keys, size on disk and what of it
// is the block index and the bloom filter.
func tableTable(w io.Writer, db *badger.DB) {
	fmt.Fprintf(w, "| Badger table | level | keys | on disk | uncompressed | index | bloom filter |\n| --- | --: | --: | --: | --: | --: | --: |\n")
	for _, t := range db.Tables() {
		fmt.Fprintf(w, "| %06d.sst | %d | %d | %d | %d | %d | %d |\n", t.ID, t.Level, t.KeyCount, t.OnDiskSize, t.UncompressedSize, t.IndexSz, t.BloomFilterSize)
	}
	fmt.Fprintln(w)
}

package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"
)

// checkTables opens every table that Badger's MANIFEST lists, read-only
// and in this goroutine, so that a damaged one is an error here rather
// than a panic in one of the goroutines badger.Open starts to open tables
// (which no recover can catch: a truncated .sst panics in
// Table.initBiggestAndSmallest). With full, every block's checksum is
// verified too (fsck); without, only the index and the last block are read.
func checkTables(dir string, full bool) (tables int, err error) {
	mf, err := os.OpenFile(filepath.Join(dir, "MANIFEST"), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("check tables: %w", err)
	}
	defer mf.Close()
	m, _, err := badger.ReplayManifestFile(mf, 0, badger.DefaultOptions(dir))
	if err != nil {
		return 0, fmt.Errorf("%w: Badger MANIFEST: %s", ErrCorrupt, oneLine(err.Error()))
	}
	ids := make([]uint64, 0, len(m.Tables))
	for id := range m.Tables {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	for _, id := range ids {
		if err := checkTable(dir, id, m.Tables[id], full); err != nil {
			return tables, fmt.Errorf("%w: table %s: %s", ErrCorrupt, table.IDToFilename(id), oneLine(err.Error()))
		}
		tables++
	}
	return tables, nil
}

func checkTable(dir string, id uint64, tm badger.TableManifest, full bool) (err error) {
	path := table.NewFilename(id, dir)
	fi, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("listed in MANIFEST but %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Size() == 0 {
		return fmt.Errorf("not a table file (%s, %d bytes)", fi.Mode().Type(), fi.Size())
	}
	mf, err := z.OpenMmapFile(path, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			// The mapping is left as it is: a table that half-opened may
			// have unmapped it already. This process refuses the store.
			err = fmt.Errorf("Badger cannot read its index (%d bytes: truncated or damaged)", fi.Size())
		}
	}()
	opts := table.Options{ReadOnly: true, BlockSize: 4 << 10, BloomFalsePositive: 0.01,
		Compression: tm.Compression, AllocPool: z.NewAllocatorPool(1), ChkMode: options.NoVerification}
	if full {
		opts.ChkMode = options.OnTableRead
	}
	t, err := table.OpenTable(mf, opts)
	if err != nil {
		return err
	}
	// Never DecrRef: at zero references Badger deletes the table's file.
	return t.MmapFile.Close(-1)
}

// VerifyTables re-reads every table of the store in dir and checks each
// block's checksum (fsck); it returns how many tables it checked. It only
// reads.
func VerifyTables(dir string) (int, error) { return checkTables(dir, true) }

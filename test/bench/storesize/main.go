// Command storesize finds out what a reynfs store's bytes are and what they
// would take under other pack formats (issue 11, part 2: the store is about
// 6x the git gc'd .git of the same history). It is a measuring tool, not
// part of the daemon; docs/storage.md holds its results and the decisions
// taken from them.
//
//	storesize store DIR
//	    DIR is a store (reynfs mount --store DIR), unmounted. Prints its
//	    files (apparent size and blocks on disk), Badger's keys by prefix,
//	    and its objects by kind (file data chunks, file and directory inode
//	    objects, objects no generation reaches) under each option: raw,
//	    per-object zstd at three levels, zstd over frames of consecutive
//	    objects (64 KiB, 1 MiB), per-object zstd with a dictionary built
//	    from the first objects of the kind, and each object compressed
//	    against the previous version of the same inode (or of the chunk at
//	    the same file offset) as zstd's raw dictionary, git's delta edge.
//	    Opened read-only: the store is not changed.
//
//	storesize files NAME SNAPSHOT...
//	    Replays a history given as snapshot directories, oldest first, the
//	    way a store sees it (unchanged files cost nothing, new chunks cost
//	    their bytes) under each chunking: fixed 64 KiB (reynfs now), fixed
//	    16 KiB, FastCDC and restic's Rabin chunker at 64 KiB average,
//	    restic's default 1 MiB average. test/bench/storesize/histories.sh
//	    makes the histories docs/storage.md reports.
//
// Every compressed size it reports is of a frame it decoded back and
// compared (dictionaries and deltas), or of a plain zstd frame; an object
// that does not shrink is counted raw, as a pack stores it.
package main

import (
	"bufio"
	"fmt"
	"os"
)

func main() {
	w := bufio.NewWriter(os.Stdout)
	err := run(w, os.Args[1:])
	w.Flush()
	if err != nil {
		fmt.Fprintf(os.Stderr, "storesize: %v\n", err)
		if _, ok := err.(usageError); ok {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError string

func (e usageError) Error() string { return string(e) }

func run(w *bufio.Writer, args []string) error {
	switch {
	case len(args) == 2 && args[0] == "store":
		return runStore(w, args[1])
	case len(args) >= 3 && args[0] == "files":
		return runFiles(w, args[1], args[2:])
	}
	return usageError("usage: storesize store DIR | storesize files NAME SNAPSHOT...")
}

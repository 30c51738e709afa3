package main

import (
	"fmt"
	"syscall"
)

// statSize returns a file's apparent size and the bytes of disk its blocks
// take (st_blocks is in 512-byte units whatever the file system's block).
func statSize(path string) (apparent, disk int64, err error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return 0, 0, fmt.Errorf("stat %s: %w", path, err)
	}
	return st.Size, st.Blocks * 512, nil
}

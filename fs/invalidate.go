package fs

// InvalidateInode tells the kernel to drop inode ino's cached attributes
// and pages. It must not be called from a FUSE handler or while holding a
// lock a handler needs (the kernel may wait on a handler to answer it).
func (f *FS) InvalidateInode(ino uint64) {
	_ = f.server.InodeNotify(ino, 0, 0) // ENOENT: the kernel holds nothing to drop
}

// InvalidateEntry tells the kernel to drop the cached name in parent,
// positive or negative. The same rules as InvalidateInode apply.
func (f *FS) InvalidateEntry(parent uint64, name string) {
	_ = f.server.EntryNotify(parent, name)
}

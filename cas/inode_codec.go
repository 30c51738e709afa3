package cas

import (
	"encoding/binary"
	"fmt"
)

// inodeV1 is the first byte of every inode object: format magic and version
// in one. A new layout gets a new byte; decoders keep reading old ones.
const inodeV1 = 0xA1

// EncodeInode returns the object bytes of in: a deterministic encoding, so
// that equal inodes get equal hashes. Layout (uvarints unless noted):
//
//	0xA1 ino mode uid gid rdev size atime mtime ctime (times: zigzag varints)
//	nxattrs { len name  len value }
//	regular:   nchunks { 32-byte hash }
//	symlink:   len target
//	directory: nentries { len name  ino  32-byte hash }
//
// Fields that do not belong to the inode's type are not written: call
// Validate first if in was not built by trusted code.
func EncodeInode(in *Inode) []byte {
	b := make([]byte, 0, encodedSizeHint(in))
	b = append(b, inodeV1)
	b = binary.AppendUvarint(b, in.Ino)
	b = binary.AppendUvarint(b, uint64(in.Mode))
	b = binary.AppendUvarint(b, uint64(in.Uid))
	b = binary.AppendUvarint(b, uint64(in.Gid))
	b = binary.AppendUvarint(b, uint64(in.Rdev))
	b = binary.AppendUvarint(b, in.Size)
	b = binary.AppendVarint(b, in.Atime)
	b = binary.AppendVarint(b, in.Mtime)
	b = binary.AppendVarint(b, in.Ctime)
	b = binary.AppendUvarint(b, uint64(len(in.Xattrs)))
	for _, x := range in.Xattrs {
		b = appendBytes(b, []byte(x.Name))
		b = appendBytes(b, x.Value)
	}
	switch in.Type() {
	case ModeRegular:
		b = binary.AppendUvarint(b, uint64(len(in.Chunks)))
		for _, c := range in.Chunks {
			b = append(b, c[:]...)
		}
	case ModeSymlink:
		b = appendBytes(b, []byte(in.Target))
	case ModeDir:
		b = binary.AppendUvarint(b, uint64(len(in.Entries)))
		for _, e := range in.Entries {
			b = appendBytes(b, []byte(e.Name))
			b = binary.AppendUvarint(b, e.Ino)
			b = append(b, e.Object[:]...)
		}
	}
	return b
}

func encodedSizeHint(in *Inode) int {
	n := 1 + 9*10 + len(in.Target) + 10 + 32*len(in.Chunks)
	for _, x := range in.Xattrs {
		n += 20 + len(x.Name) + len(x.Value)
	}
	for _, e := range in.Entries {
		n += 20 + len(e.Name) + 32
	}
	return n
}

func appendBytes(b, s []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// DecodeInode parses an object written by EncodeInode. It rejects anything
// EncodeInode would not have written from a valid Inode (see Validate):
// non-minimal varints, unsorted or duplicate names, a chunk count that does
// not match the size, trailing bytes. The result shares no memory with b.
func DecodeInode(b []byte) (*Inode, error) {
	in, err := decodeInode(b)
	if err != nil {
		return nil, fmt.Errorf("decode inode: %w", err)
	}
	return in, nil
}

func decodeInode(b []byte) (*Inode, error) {
	if len(b) == 0 || b[0] != inodeV1 {
		return nil, invalidf("no inode magic byte")
	}
	r := reader{b: b[1:]}
	in := &Inode{
		Ino:  r.uvarint(),
		Mode: r.uint32(),
		Uid:  r.uint32(),
		Gid:  r.uint32(),
		Rdev: r.uint32(),
		Size: r.uvarint(),
	}
	in.Atime = r.varint()
	in.Mtime = r.varint()
	in.Ctime = r.varint()
	if n := r.count(3); n > 0 {
		in.Xattrs = make([]Xattr, n)
		for i := range in.Xattrs {
			in.Xattrs[i].Name = string(r.bytes())
			if v := r.bytes(); len(v) > 0 {
				in.Xattrs[i].Value = append([]byte(nil), v...)
			}
		}
	}
	switch in.Type() {
	case ModeRegular:
		if n := r.count(len(Hash{})); n > 0 {
			in.Chunks = make([]Hash, n)
			for i := range in.Chunks {
				in.Chunks[i] = r.hash()
			}
		}
	case ModeSymlink:
		in.Target = string(r.bytes())
	case ModeDir:
		if n := r.count(2 + 1 + len(Hash{})); n > 0 {
			in.Entries = make([]Entry, n)
			for i := range in.Entries {
				e := &in.Entries[i]
				e.Name = string(r.bytes())
				e.Ino = r.uvarint()
				e.Object = r.hash()
			}
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) != 0 {
		return nil, invalidf("%d trailing bytes", len(r.b))
	}
	if err := in.validate(); err != nil {
		return nil, err
	}
	return in, nil
}

// reader consumes b front to back; after the first error every read returns
// a zero value and err keeps that first error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = invalidf(format, args...)
	}
	r.b = nil
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad uvarint")
		return 0
	}
	if n > 1 && r.b[n-1] == 0 {
		r.fail("non-minimal uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	u := r.uvarint()
	return int64(u>>1) ^ -int64(u&1) // zigzag, as binary.AppendVarint writes
}

func (r *reader) uint32() uint32 {
	v := r.uvarint()
	if v > 1<<32-1 {
		r.fail("value %d overflows 32 bits", v)
		return 0
	}
	return uint32(v)
}

// count reads an element count and checks that the rest of the input could
// hold that many elements of at least minSize bytes, so garbage cannot make
// the decoder allocate more than the input's size.
func (r *reader) count(minSize int) int {
	n := r.uvarint()
	if n > uint64(len(r.b)/minSize) {
		r.fail("count %d exceeds the input", n)
		return 0
	}
	return int(n)
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail("length %d exceeds the input", n)
		return nil
	}
	s := r.b[:n]
	r.b = r.b[n:]
	return s
}

func (r *reader) hash() Hash {
	var h Hash
	if len(r.b) < len(h) {
		r.fail("truncated hash")
		return h
	}
	copy(h[:], r.b)
	r.b = r.b[len(h):]
	return h
}

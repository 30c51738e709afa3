package rewind

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

	"github.com/aymanbagabas/go-udiff"

	"github.com/reynfs/reynfs/cas"
)

// maxPatchFile is the largest file Patch compares line by line.
const maxPatchFile = 4 << 20

// Patch writes a unified diff of the regular files in cs (from DiffRoots
// over s), as `git diff` prints it: text files line by line, other files
// as "Binary files ... differ".
func Patch(s cas.Store, cs []Change, w io.Writer) error {
	for _, c := range cs {
		if c.Dir {
			continue
		}
		a, aok, err := fileText(s, c.Old)
		if err != nil {
			return fmt.Errorf("diff %s: %w", c.Path, err)
		}
		b, bok, err := fileText(s, c.New)
		if err != nil {
			return fmt.Errorf("diff %s: %w", c.Path, err)
		}
		if !aok && !bok {
			continue // a symlink, device or fifo on both sides
		}
		oldName, newName := quoteName("a/"+c.Path), quoteName("b/"+c.Path)
		if c.Old.IsZero() {
			oldName = "/dev/null"
		}
		if c.New.IsZero() {
			newName = "/dev/null"
		}
		if isBinary(a) || isBinary(b) {
			if _, err := fmt.Fprintf(w, "Binary files %s and %s differ\n", oldName, newName); err != nil {
				return err
			}
			continue
		}
		if _, err := io.WriteString(w, udiff.Unified(oldName, newName, string(a), string(b))); err != nil {
			return err
		}
	}
	return nil
}

// fileText returns the content of the regular file whose inode object is
// h (nil for the zero hash); ok is false for other kinds of inode. Files
// past maxPatchFile come back as a NUL byte, which reads as binary.
func fileText(s cas.Store, h cas.Hash) (data []byte, ok bool, err error) {
	if h.IsZero() {
		return nil, true, nil
	}
	in, err := inode(s, h)
	if err != nil {
		return nil, false, err
	}
	if in.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, false, nil
	}
	if in.Size > maxPatchFile {
		return []byte{0}, true, nil
	}
	out := make([]byte, in.Size)
	for i, ch := range in.Chunks {
		if ch.IsZero() {
			continue
		}
		b, err := s.Get(ch)
		if err != nil {
			return nil, false, err
		}
		copy(out[uint64(i)*cas.ChunkSize:], b)
	}
	return out, true, nil
}

func isBinary(b []byte) bool { return bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0 }

// quoteName writes a file name for a patch header as git does with a name
// it cannot print as is: C-quoted in double quotes. A name holds whatever
// anyone who can write in the workspace chose, and an ESC sequence or a
// newline in a header printed raw would drive the terminal or forge a
// header; git apply reads the quoted form.
func quoteName(name string) string {
	if !utf8.ValidString(name) || strings.ContainsAny(name, "\"\\") ||
		strings.IndexFunc(name, func(r rune) bool { return r != ' ' && !unicode.IsPrint(r) }) >= 0 {
		return strconv.Quote(name)
	}
	return name
}

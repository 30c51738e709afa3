package cas

import "os"

// LogicalLogBytes is the size of the segment log without the active
// segment's pre-written zeros (prefill.go): sealed segments whole, the
// active one to its end. Tests that compare store sizes while the log is
// open use it.
func LogicalLogBytes(b *Badger) (int64, error) {
	l := b.log
	segs, err := listSegments(l.dir)
	if err != nil {
		return 0, err
	}
	end := b.LogEnd()
	var n int64
	for _, s := range segs {
		if s == end.Seg {
			n += end.Off
			continue
		}
		fi, err := os.Stat(l.path(s))
		if err != nil {
			return 0, err
		}
		n += fi.Size()
	}
	return n, nil
}

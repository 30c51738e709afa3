package daemon

import (
	"cmp"
	"fmt"
	"os"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/fs"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
)

// rewindOffline rewinds an unmounted workspace: the project directory's
// changes since the last unmount are recorded first (as a mount would), so
// they stay reachable in the abandoned branch; then the store is rewound
// and the target written back into the directory, so that the directory
// and the next mount both show the target.
func rewindOffline(j *journal.Journal, seq uint64, label string) (*rewind.Result, error) {
	b, err := j.GetMeta(metaDir)
	if err != nil {
		return nil, err
	}
	dir := string(b)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("%w: the workspace's project directory %s is missing", ErrUsage, dir)
	}
	views, err := j.GetMeta(metaViews)
	if err != nil {
		return nil, err
	}
	d := &Daemon{cfg: Config{Paths: Paths{Dir: dir, Mountpoint: dir}, Log: zerolog.Nop()}, log: zerolog.Nop(), j: j,
		views: cmp.Or(string(views), fs.ViewDir)}
	defer d.closeDir()
	if _, err := d.prepare(); err != nil {
		return nil, err
	}
	if already, err := alreadyAt(j, seq); err != nil || already {
		return &rewind.Result{Target: seq, Changes: []rewind.Change{}}, err
	}
	res, err := rewind.RewindStoreAs(j, seq, false, label)
	if err != nil {
		return nil, err
	}
	t, err := rewind.Reconstruct(j, j.Head())
	if err != nil {
		return nil, err
	}
	root, blobs, err := t.Root()
	if err != nil {
		return nil, err
	}
	if err := rewind.StoreBlobs(j.Objects(), blobs); err != nil {
		return nil, err
	}
	if err := d.writeback(t, root); err != nil {
		return nil, err
	}
	return res, nil
}

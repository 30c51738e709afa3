package daemon

// The write-back and its bookkeeping in the store.
//
// metaDirBase names the tree reynfs last wrote into the project directory:
// a later import against it (a stat check) tells what someone else changed
// there. It is set to the target of every write-back that ran to its end,
// even one that failed on some paths, because the paths it failed on are
// listed in metaWbFailed with the lstat signature each had just after the
// failure. While a path's signature is unchanged, the import keeps
// dirbase's version of it (Importer.Pin) and the next write-back tries it
// again (ExportOptions.Force); so a failed path is neither mistaken for a
// deletion made while unmounted nor dropped. A path whose signature
// changed was touched by someone else: it is imported like any change.
//
// metaWriteback holds the target while a write-back runs; a crash leaves
// it set and the next mount redoes the write-back. A write-back first
// looks for changes made in the directory behind reynfs's back (a process
// that was inside it before the mount, or anyone while unmounted) and
// keeps them: they are not overwritten or removed (a directory whose own
// mode, owner or xattrs changed keeps those while its entries are
// written), and since dirbase becomes the target, the next mount imports
// them as "changes made while unmounted", a generation of their own, so
// they reach the store without a second mechanism. The same check makes the redo after a crash safe:
// what the interrupted write-back already put there equals the target and
// is not reported.

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/rewind"
)

// metaWbFailed lists the paths the last write-back could not write.
const metaWbFailed = "writeback-failed"

type failedPath struct {
	Path string     `json:"path"`
	Err  string     `json:"err"`
	Sig  rewind.Sig `json:"sig"`
}

// WritebackError reports what a write-back left different from the tree
// it wrote: paths kept because they changed underneath, and paths it
// could not write. Its message has one line per path.
type WritebackError struct {
	Dir    string
	Kept   []string
	Failed []rewind.Failure
}

func (e *WritebackError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "write back %s:", e.Dir)
	if len(e.Kept) > 0 {
		fmt.Fprintf(&b, " kept %d paths changed underneath the mount (not overwritten; the next mount records them)", len(e.Kept))
	}
	if len(e.Failed) > 0 {
		if len(e.Kept) > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " %d paths not written (retried at the next mount; the store has them)", len(e.Failed))
	}
	for _, p := range e.Kept {
		fmt.Fprintf(&b, "\nkept %s", p)
	}
	for _, f := range e.Failed {
		fmt.Fprintf(&b, "\nnot written %s: %v", f.Path, f.Err)
	}
	return b.String()
}

// openDir opens the project directory once, before the mount goes over it:
// the write-back at unmount reaches the directory underneath through it.
func (d *Daemon) openDir() error {
	if d.dirf != nil {
		return nil
	}
	f, err := rewind.OpenDir(d.cfg.Dir)
	if err != nil {
		return fmt.Errorf("project directory: %w", err)
	}
	d.dirf = f
	return nil
}

func (d *Daemon) warn(s string) {
	if d.cfg.Warn != nil {
		d.cfg.Warn(s)
	}
}

func (d *Daemon) closeDir() {
	if d.dirf != nil {
		_ = d.dirf.Close()
		d.dirf = nil
	}
}

func (d *Daemon) dirBase() (*tree.Tree, error) {
	b, err := d.j.GetMeta(metaDirBase)
	if err != nil {
		return nil, err
	}
	h, err := cas.Parse(string(b))
	if err != nil {
		return nil, fmt.Errorf("store meta %s: %w", metaDirBase, err)
	}
	return tree.Load(d.j.Objects(), h)
}

// failed returns the paths the last write-back could not write.
func (d *Daemon) failed() ([]failedPath, error) {
	b, err := d.j.GetMeta(metaWbFailed)
	if err != nil || len(b) == 0 {
		return nil, err
	}
	var fs []failedPath
	if err := json.Unmarshal(b, &fs); err != nil {
		return nil, fmt.Errorf("store meta %s: %w", metaWbFailed, err)
	}
	return fs, nil
}

// pins are the failed paths nobody touched since: the directory still
// holds what the failed write-back left there.
func (d *Daemon) pins() (rewind.PathSet, error) {
	fs, err := d.failed()
	if err != nil || len(fs) == 0 {
		return nil, err
	}
	pins := rewind.PathSet{}
	for _, f := range fs {
		if rewind.SigAt(d.dirf, f.Path) == f.Sig {
			pins[f.Path] = true
		}
	}
	return pins, nil
}

// redoWriteback finishes a write-back a crash interrupted, or retries the
// paths the last one failed on. Paths that fail again are logged and
// recorded, not fatal: the mount serves head.
func (d *Daemon) redoWriteback() error {
	b, err := d.j.GetMeta(metaWriteback)
	if err != nil {
		return err
	}
	var t *tree.Tree
	var h cas.Hash
	if len(b) > 0 {
		if h, err = cas.Parse(string(b)); err != nil {
			return fmt.Errorf("store meta %s: %w", metaWriteback, err)
		}
		d.log.Info().Str("root", h.Short()).Msg("finishing an interrupted write-back")
	} else {
		fs, err := d.failed()
		if err != nil || len(fs) == 0 {
			return err
		}
		b, err := d.j.GetMeta(metaDirBase)
		if err != nil {
			return err
		}
		if h, err = cas.Parse(string(b)); err != nil {
			return fmt.Errorf("store meta %s: %w", metaDirBase, err)
		}
		d.log.Info().Int("paths", len(fs)).Msg("retrying the paths the last write-back failed on")
	}
	if t, err = tree.Load(d.j.Objects(), h); err != nil {
		return err
	}
	err = d.writeback(t, h)
	if we, ok := errors.AsType[*WritebackError](err); ok {
		// Logged path by path; the next write-back tries again.
		for _, line := range strings.Split(we.Error(), "\n") {
			d.warn(line)
		}
		return nil
	}
	return err
}

// dirSince reads metaDirSince (0 when unknown).
func (d *Daemon) dirSince() (int64, error) {
	b, err := d.j.GetMeta(metaDirSince)
	if err != nil || len(b) == 0 {
		return 0, err
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("store meta %s: %w", metaDirSince, err)
	}
	return v, nil
}

// writeback brings the project directory from dirbase to t (root is t's
// Merkle root), crash-safely: the target is recorded first, so a crash
// midway is redone on next mount. It returns a *WritebackError when it
// kept changes made underneath or could not write some paths; everything
// else is written either way.
func (d *Daemon) writeback(t *tree.Tree, root cas.Hash) error {
	if err := d.openDir(); err != nil {
		return err
	}
	base, err := d.dirBase()
	if err != nil {
		return err
	}
	pins, err := d.pins()
	if err != nil {
		return err
	}
	if err := d.j.SetMeta(metaWriteback, []byte(root.String())); err != nil {
		return err
	}
	since, err := d.dirSince()
	if err != nil {
		return err
	}
	start := time.Now().UnixNano()
	kept, err := rewind.UnderneathSince(d.j.Objects(), d.dirf, base, t, pins, since)
	if err != nil {
		// Without knowing what changed underneath nothing may be
		// overwritten: stop here; the next mount redoes the write-back.
		return fmt.Errorf("write back %s: look for changes underneath: %w", d.cfg.Dir, err)
	}
	d.log.Info().Dur("took", time.Since(time.Unix(0, start))).Bool("by_ctime", since > 0).Int("kept", len(kept.List)).Msg("write-back: checked for changes underneath")
	werr := &WritebackError{Dir: d.cfg.Dir, Kept: kept.List}
	for _, p := range kept.List {
		d.log.Warn().Str("path", p).Msg("write-back: changed underneath the mount; kept, not overwritten")
	}
	err = rewind.ExportAt(t, d.dirf, rewind.ExportOptions{Base: base, Keep: kept.Paths, KeepAttrs: kept.Attrs, Force: pins})
	if ee, ok := errors.AsType[*rewind.ExportError](err); ok {
		werr.Failed = ee.Failures
	} else if err != nil {
		return fmt.Errorf("write back %s: %w", d.cfg.Dir, err)
	}
	fs := make([]failedPath, 0, len(werr.Failed))
	for _, f := range werr.Failed {
		d.log.Error().Str("path", f.Path).Err(f.Err).Msg("write-back: not written")
		fs = append(fs, failedPath{Path: f.Path, Err: f.Err.Error(), Sig: rewind.SigAt(d.dirf, f.Path)})
	}
	list := ""
	if len(fs) > 0 {
		b, err := json.Marshal(fs)
		if err != nil {
			return err
		}
		list = string(b)
	}
	// Kept or failed paths hold something other than t: the next check
	// compares everything (no dirsince).
	next := ""
	if len(werr.Kept) == 0 && len(fs) == 0 {
		next = sinceMeta(start, pins)
	}
	if err := d.setMetas(metaWbFailed, list, metaDirBase, root.String(), metaDirSince, next, metaWriteback, ""); err != nil {
		return err
	}
	if len(werr.Kept) > 0 || len(werr.Failed) > 0 {
		return werr
	}
	return nil
}

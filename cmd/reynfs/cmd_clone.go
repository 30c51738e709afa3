package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
	"github.com/reynfs/reynfs/cmd/reynfs/termsafe"
	"github.com/reynfs/reynfs/fs/tree"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
	"github.com/reynfs/reynfs/rewind/replica"
)

type cloneOptions struct {
	storeOptions
	at       string
	take     bool
	lazy     bool
	prefetch bool
	asJSON   bool
	quiet    bool // no closing line (mount --follow clones first)
}

func newCloneCommand() *cobra.Command {
	var o cloneOptions
	cmd := &cobra.Command{
		Use:   "clone URL#WS DIR [--at TARGET | --take | --lazy [--prefetch=false]] [--store STORE]",
		Short: "Make a new workspace in DIR from a remote's workspace",
		Long: `Fetch the workspace WS of the remote at URL (its whole history as the remote's head
covers it: every record under its original seq, every object they reach) into a new
store for DIR, make the state TARGET names live (any rewind target: a seq, gN, -N, a
label, a branch; by default the remote's head) and write it into DIR, which must be
missing or empty. Every target names the same state in the clone as in the workspace
it came from. WS defaults to DIR's base name. 'reynfs mount DIR' then continues from
there; the remote is named "origin" in the new store ('reynfs push --ws NEW' pushes the
clone as a new workspace there, sending only what the clone added).

--take takes the workspace over, for when its writer died or is gone: clone waits
(saying so on stderr; Ctrl-C stops it) until the writer's lease has expired by the
server's clock, clones the remote's head, and makes the new store the workspace's
writer in a new epoch: 'reynfs push' from the clone then continues WS itself. A
writer that comes back finds itself deposed; what it had not pushed is not in WS.

--lazy fetches the records and the trees only (every directory and inode, so that
stat, readdir and 'git status' need nothing more) and leaves file data on the remote:
DIR is left empty, 'reynfs mount DIR' serves the clone at once, and each object is
fetched with one ranged GET on its first read, verified and kept. After the mount a
background prefetcher fetches the rest (--prefetch=false: not unless 'mount
--prefetch' asks); 'reynfs status' shows what is still on the remote. The remote must
stay reachable until then: a read of an object it cannot fetch fails (EIO) with a
line in reynfs.log naming the remote. Unmounting fetches what is left, to write DIR.

` + remoteURLHelp + "\n\n" + exitCodeHelp,
		Args: usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runClone(cmd.Context(), o, args[0], args[1])
		},
	}
	cmd.Flags().StringVar(&o.at, "at", "", "the state to make live (default: the remote's head)")
	cmd.Flags().BoolVar(&o.take, "take", false, "take the workspace over once its writer's lease has expired")
	cmd.Flags().BoolVar(&o.lazy, "lazy", false, "leave file data on the remote; fetch it on first read")
	cmd.Flags().BoolVar(&o.prefetch, "prefetch", true, "with --lazy: a mount fetches the rest in the background")
	cmd.Flags().StringVar(&o.store, "store", "", "store folder of the new workspace (default: the one 'reynfs mount DIR' uses)")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print JSON")
	return cmd
}

type cloneInfo struct {
	*replica.CloneResult
	Dir   string `json:"dir"`
	Store string `json:"store"`
}

func runClone(ctx context.Context, o cloneOptions, src, dir string) error {
	raw, ws, found := strings.Cut(src, "#")
	dest, err := absPath(dir)
	if err != nil {
		return err
	}
	if !found || ws == "" {
		ws = filepath.Base(dest)
	}
	if err := replica.CheckName(ws); err != nil {
		return fmt.Errorf("%w: workspace %v", errUsage, err)
	}
	if o.lazy && o.take {
		return fmt.Errorf("%w: --lazy cannot be combined with --take", errUsage)
	}
	if !o.lazy && !o.prefetch {
		return fmt.Errorf("%w: --prefetch=false goes with --lazy", errUsage)
	}
	if o.take && o.at != "" {
		return fmt.Errorf("%w: --take clones the remote's head; it cannot be combined with --at", errUsage)
	}
	if names, err := os.ReadDir(dest); err == nil && len(names) > 0 {
		return fmt.Errorf("%w: %s is not empty; clone writes into a new or empty directory", errUsage, dest)
	} else if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("%w: %s: %v", errUsage, dest, err)
	}
	store := o.store
	if store == "" {
		if store, err = daemon.DefaultStore(dest); err != nil {
			return err
		}
	} else if store, err = absPath(store); err != nil {
		return err
	}
	if within(store, dest) || within(dest, store) {
		return fmt.Errorf("%w: store %s and directory %s overlap (mounting over your own store deadlocks)", errUsage, store, dest)
	}
	db := daemon.DBPath(store)
	if checkStoreExists(dest, store) == nil {
		return fmt.Errorf("%w: %s holds a store already; clone makes a new one (--store names another)", errUsage, store)
	}
	b, err := openRemote(ctx, raw)
	if err != nil {
		return err
	}
	var res *replica.CloneResult
	if _, err := os.Stat(store); os.IsNotExist(err) {
		if err := os.MkdirAll(store, 0o700); err != nil {
			return fmt.Errorf("clone: %w", err)
		}
		defer func() {
			if res == nil {
				_ = os.Remove(store) // Clone left nothing in it
			}
		}()
	}
	if o.take {
		if res, err = replica.Take(ctx, b, ws, db, replica.TakeOptions{Wait: waitLine(src)}); err != nil {
			return err
		}
		err = exportLive(db, dest, b.String())
	} else {
		err = busy(!o.asJSON, "cloning "+src, func() error {
			if o.lazy {
				if res, err = replica.CloneLazy(ctx, b, ws, db, o.at); err != nil {
					return err
				}
				return adoptLazy(db, dest, b.String(), o.prefetch)
			}
			if res, err = replica.Clone(ctx, b, ws, db, o.at); err != nil {
				return err
			}
			return exportLive(db, dest, b.String())
		})
	}
	if err != nil {
		return err
	}
	if o.quiet {
		return nil
	}
	if o.asJSON {
		return printJSON(cloneInfo{CloneResult: res, Dir: dest, Store: store})
	}
	if o.take {
		termsafe.Printf("took over %s#%s at seq %d (epoch %d): %d records, %d objects into %s, store %s; 'reynfs push' continues it\n",
			raw, ws, res.Head, res.Epoch, res.Records, res.Objects, dest, store)
		return nil
	}
	if o.lazy {
		termsafe.Printf("cloned %s#%s lazily (seqs through %d: %d records, %d objects; %d objects, %s left on the remote) for %s, store %s; live: seq %d; 'reynfs mount %s' serves it\n",
			raw, ws, res.Head, res.Records, res.Objects, res.RemoteObjects, human(res.RemoteBytes), dest, store, res.Target, dest)
		if res.PinError != "" {
			termsafe.Fprintf(os.Stderr, "reynfs: warning: could not pin the data left on the remote (%s); 'reynfs gc --remote' may delete what this clone has not fetched once its generations are forgotten\n", res.PinError)
		}
		return nil
	}
	termsafe.Printf("cloned %s#%s (seqs through %d: %d records, %d objects) into %s, store %s; live: seq %d\n",
		raw, ws, res.Head, res.Records, res.Objects, dest, store, res.Target)
	return nil
}

// waitLine returns Take's Wait: a line on stderr when the holder changes
// (or every 10 s) while the lease it waits for is live.
func waitLine(src string) func(replica.Holder, time.Duration) {
	var last replica.Holder
	var said time.Time
	return func(h replica.Holder, left time.Duration) {
		if h == last && time.Since(said) < 10*time.Second {
			return
		}
		last, said = h, time.Now()
		termsafe.Fprintf(os.Stderr, "waiting for the lease of %s pid %d on %s to expire (%s left by the server's clock; Ctrl-C stops)\n",
			h.Host, h.Pid, src, left.Round(time.Second))
	}
}

// exportLive writes the live state of the store db into dir, records
// that dir holds it (daemon.Adopt), so that mount serves it, and names
// the remote it came from "origin".
func exportLive(db, dir, origin string) error {
	j, err := journal.Open(db, journal.Options{Logger: zerolog.Nop()})
	if err != nil {
		return err
	}
	defer j.Close()
	t, err := rewind.Reconstruct(j, j.Head())
	if err != nil {
		return err
	}
	root, _, err := t.Root()
	if err != nil {
		return err
	}
	since := time.Now().UnixNano()
	if err := rewind.Export(t, nil, dir); err != nil {
		return err
	}
	if err := daemon.Adopt(j, dir, root, since); err != nil {
		return err
	}
	return replica.SetRemote(j, "origin", origin)
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+string(filepath.Separator))
}

// adoptLazy is exportLive for a lazy clone: dir gets the root
// directory's own attributes and nothing in it, and the store records
// that dir holds exactly that (an empty tree with the live root's
// attributes), so that the first mount finds no change made while
// unmounted and serves the live tree; its write-back at unmount writes
// the files.
func adoptLazy(db, dir, origin string, prefetch bool) error {
	j, err := journal.Open(db, journal.Options{Logger: zerolog.Nop()})
	if err != nil {
		return err
	}
	defer j.Close()
	// A replay may read a chunk; nothing here reports what is left on
	// the remote (no pass counting it).
	if _, err := replica.OpenLazy(context.Background(), j, db, replica.LazyOptions{Uncounted: true, Log: zerolog.Nop()}); err != nil {
		return err
	}
	t, err := rewind.Reconstruct(j, j.Head())
	if err != nil {
		return err
	}
	root, blobs, err := t.Root()
	if err != nil {
		return err
	}
	// A head past the last generation replays records: the root and the
	// directories above what they changed are new objects, stored by no
	// one yet.
	if err := rewind.StoreBlobs(j.Objects(), blobs); err != nil {
		return err
	}
	data, err := j.Objects().Get(root)
	if err != nil {
		return err
	}
	in, err := cas.DecodeInode(data)
	if err != nil {
		return err
	}
	in.Entries = nil
	empty, err := j.Objects().Put(cas.EncodeInode(in))
	if err != nil {
		return err
	}
	et, err := tree.Load(j.Objects(), empty)
	if err != nil {
		return err
	}
	since := time.Now().UnixNano()
	if err := rewind.Export(et, nil, dir); err != nil {
		return err
	}
	if err := daemon.Adopt(j, dir, empty, since); err != nil {
		return err
	}
	if !prefetch {
		if err := replica.SetLazyPrefetch(db, false); err != nil {
			return err
		}
	}
	return replica.SetRemote(j, "origin", origin)
}

package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
)

type fsckOptions struct {
	storeOptions
	salvage string
	repair  bool
	asJSON  bool
	remote  string // fsck --remote NAME|URL (cmd_remoteread.go)
	ws      string
}

func newFsckCommand() *cobra.Command {
	var o fsckOptions
	cmd := &cobra.Command{
		Use:   "fsck [DIR] [--store STORE] [--repair] [--salvage OUTDIR] [--json]",
		Short: "Check an unmounted store: re-hash every object, rebuild every generation",
		Long: `Check the store of the workspace DIR (default: the current directory) without
modifying it: re-hash every stored object, decode every retained journal record, walk
the tree of every retained generation naming each path whose data is missing or
damaged, rebuild the head state, and verify Badger's tables, logs and the store
manifest's durable marks. A mounted store is refused (unmount it first).

--salvage OUTDIR writes the newest state that can be read (head, else the newest
readable generation) into OUTDIR, a new directory: every readable file, with
unreadable 64 KiB ranges left as holes, and lists what it could not write. The
store itself is only read.

--repair first repairs what can be rebuilt from the store's segment log: a Badger
write-ahead log damaged past the point where its replay stops (as a power cut can
leave the one being written), which mount refuses. A copy of the damaged file is
kept beside the store (db.damaged-TIME/); Badger cuts it where its replay stops and
the index is caught up from the segment log. Every whole entry found past the
damage is looked up afterwards; one the store does not have again is reported as
damage. Then the check runs as without --repair.

--remote NAME|URL checks a remote instead, mounted or not (NAME: a remote of the
workspace's store; URL as 'reynfs remote add' takes it), reading it only: every workspace's HEAD (or
--ws WS's), every segment HEAD covers (checksums, and that they tile seqs 1..HEAD),
every pack (fetched once: checksum, its index against packs/ID.idx, every object's
hash), and that every object the records reach (chunks, agent states, the trees of
generations, imports and restores walked) is in some index. Each problem is one line
naming the key; a clean remote prints one summary line.

Exit codes: 0 the store is sound, 1 damage found (and listed), 3 the store is mounted
or in use, 4 the store cannot be opened at all (with --remote: no reynfs remote there).`,
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			if o.remote != "" {
				return runFsckRemote(cmd.Context(), o, dir)
			}
			if o.ws != "" {
				return fmt.Errorf("%w: --ws goes with --remote", errUsage)
			}
			return runFsck(cmd.Context(), o, dir)
		},
	}
	cmd.Flags().StringVar(&o.store, "store", "", "store folder of the workspace")
	cmd.Flags().StringVar(&o.salvage, "salvage", "", "write the newest readable state into `OUTDIR`")
	cmd.Flags().BoolVar(&o.repair, "repair", false, "first rebuild a damaged Badger log's entries from the segment log (keeps a copy)")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&o.remote, "remote", "", "check the remote `NAME|URL` instead of the store")
	cmd.Flags().StringVar(&o.ws, "ws", "", "with --remote: check this workspace only")
	return cmd
}

// fsckResult is the --json output.
type fsckResult struct {
	Store   string                `json:"store"`
	Tables  int                   `json:"tables"`
	Repair  *journal.RepairResult `json:"repair,omitempty"`
	Report  *rewind.FsckReport    `json:"report"`
	Salvage *rewind.SalvageResult `json:"salvage,omitempty"`
	// SalvageError: nothing could be salvaged, and why.
	SalvageError string `json:"salvage_error,omitempty"`
	Damaged      bool   `json:"damaged"`
}

var errDamaged = errors.New("store damaged")

func runFsck(ctx context.Context, o fsckOptions, dir string) error {
	store, err := findStore(o.storeOptions, dir)
	if err != nil {
		return err
	}
	// A mount of the store is refused from mountinfo, without asking its
	// daemon: one that is stopped or hung would keep fsck waiting.
	if m, ok := daemon.MountOfStore(store); ok {
		return fmt.Errorf("%w: fsck checks an unmounted store and %s is mounted at %s; run `reynfs unmount` first", journal.ErrLocked, store, m.Point)
	}
	if err := daemon.Call(ctx, store, api.StatusParams{}, nil, 10*time.Second); !errors.Is(err, daemon.ErrNotRunning) {
		if ctx.Err() != nil {
			return err // interrupted while asking: nothing is known
		}
		return fmt.Errorf("%w: fsck checks an unmounted store and %s is served by a daemon; run `reynfs unmount` first", journal.ErrLocked, store)
	}
	db := daemon.DBPath(store)
	if err := checkStoreExists(dir, store); err != nil {
		return err
	}
	res := fsckResult{Store: store}
	if o.repair {
		res.Repair, err = journal.Repair(db, journal.Options{Logger: zerolog.Nop()}, rewind.Reindex)
		if err != nil {
			return err
		}
	}
	j, err := journal.Open(db, journal.Options{Logger: zerolog.Nop(), ReadOnly: true, Damaged: true})
	if err != nil {
		return err
	}
	defer j.Close()
	if err := attachLazy(j, db, true); err != nil {
		return err
	}
	res.Report, err = rewind.Fsck(j)
	if err != nil {
		return err
	}
	tables, terr := journal.VerifyTables(db)
	res.Tables = tables
	if terr != nil {
		res.Report.Store = append(res.Report.Store, oneLine(terr.Error()))
	}
	if o.salvage != "" {
		if res.Salvage, err = rewind.Salvage(j, o.salvage); err != nil {
			res.SalvageError = oneLine(err.Error()) // the report still prints
		}
	}
	if r := res.Repair; r != nil && len(r.Missing) > 0 {
		res.Report.Store = append(res.Report.Store, fmt.Sprintf("%d keys written past the damage did not come back from the segment log: %s (the damaged log is in %s)",
			len(r.Missing), strings.Join(r.Missing, ", "), r.Copies))
	}
	res.Damaged = res.Report.Damaged()
	if o.asJSON {
		if err := printJSON(res); err != nil {
			return err
		}
	} else {
		printFsck(&res)
	}
	if res.Damaged {
		return fmt.Errorf("%w: %s (details above; `reynfs fsck --salvage OUTDIR` writes out what is readable)", errDamaged, store)
	}
	if res.SalvageError != "" {
		return fmt.Errorf("salvage: %s", res.SalvageError)
	}
	return nil
}

func printFsck(res *fsckResult) {
	r := res.Report
	fmt.Printf("store:       %s\n", res.Store)
	if rr := res.Repair; rr != nil {
		if len(rr.Logs) == 0 {
			fmt.Println("repair:      no damaged Badger log, nothing to repair")
		}
		for _, l := range rr.Logs {
			fmt.Printf("repaired:    Badger log %s: %s; cut at offset %d (%d whole entries past the damage)\n", l.File, l.Damage, l.Cut, l.Past)
		}
		if len(rr.Logs) > 0 {
			fmt.Printf("repaired:    %d keys written past the damage are back from the segment log, %d not; the damaged logs as they were: %s\n", rr.Restored, len(rr.Missing), rr.Copies)
		}
	}
	fmt.Printf("tables:      %d verified\n", res.Tables)
	fmt.Printf("objects:     %d re-hashed (%s), %d bad\n", r.Objects, human(r.ObjectBytes), len(r.BadObjects))
	fmt.Printf("records:     %d decoded\n", r.Records)
	if r.OnRemote > 0 {
		fmt.Printf("on remote:   %d chunks a lazy clone left on its remote (fetched on first read; not damage)\n", r.OnRemote)
	}
	fmt.Printf("generations: %d checked\n", len(r.Generations))
	for _, s := range r.Store {
		fmt.Printf("DAMAGE store: %s\n", s)
	}
	for _, b := range r.BadObjects {
		fmt.Printf("DAMAGE object %s: %s\n", b.Hash, b.Error)
	}
	for _, b := range r.BadRecords {
		fmt.Printf("DAMAGE journal: %s\n", b)
	}
	printGen := func(name string, g *rewind.GenCheck) {
		if g.Error != "" {
			fmt.Printf("DAMAGE %s does not reconstruct: %s\n", name, g.Error)
		}
		for _, d := range g.Damaged {
			fmt.Printf("DAMAGE %s: %s: %s\n", name, d.Path, d.Problem)
		}
	}
	for i := range r.Generations {
		g := &r.Generations[i]
		name := fmt.Sprintf("generation at seq %d", g.Seq)
		if g.ID > 0 {
			name = fmt.Sprintf("g%d (seq %d)", g.ID, g.Seq)
		}
		printGen(name, g)
	}
	printGen(fmt.Sprintf("head (seq %d)", r.Head.Seq), &r.Head)
	if s := res.Salvage; s != nil {
		fmt.Printf("salvaged:    %d entries of seq %d (%s)\n", s.Files, s.Seq, s.From)
		for _, d := range s.Skipped {
			fmt.Printf("NOT SALVAGED %s: %s\n", d.Path, d.Problem)
		}
	}
	if res.SalvageError != "" {
		fmt.Printf("NOT SALVAGED: %s\n", res.SalvageError)
	}
	if res.Damaged {
		fmt.Println("result:      DAMAGED")
	} else {
		fmt.Println("result:      clean")
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/reynfs/reynfs/cmd/reynfs/termsafe"
	"github.com/reynfs/reynfs/rewind/replica"
)

const remoteGCHelp = `With --remote NAME (a remote name of this store, or a URL), collect the remote instead:
mark what every workspace's HEAD reaches (from its floor, through a fork's parent), write
the packs and segments nothing reaches into a condemned list on the remote, and delete
what an older list named once it is older than --grace (24h by default, by the server's
clock) and still unreached. So a first run deletes nothing; run it again after the grace
(cron does). A pack at least half dead (by 256 KiB or more) has its live objects copied
into a new pack and is condemned with the rest (--repack=false leaves it); other packs
with some live objects stay, their dead bytes reported. A pack a lazy clone pinned stays
whole. Pushes running meanwhile never lose an object ('reynfs forget --remote' moves a
workspace's floor).`

func runRemoteGC(ctx context.Context, o storeOptions, dir, remote string, grace time.Duration, graceSet bool, g replica.GCOptions, asJSON bool) error {
	if remote == "" {
		return fmt.Errorf("%w: --grace and --repack go with --remote NAME", errUsage)
	}
	dry := g.DryRun
	if grace < 0 {
		return fmt.Errorf("%w: --grace %s: want a duration ≥ 0", errUsage, grace)
	}
	if graceSet && grace == 0 {
		grace = time.Nanosecond // "0": due at once (still a later run)
	}
	b, err := resolveRemote(ctx, o, dir, remote, "gc --remote")
	if err != nil {
		return err
	}
	var res *replica.GCResult
	err = busy(!asJSON, "collecting "+b.String(), func() error {
		g.Grace = grace
		res, err = replica.GC(ctx, b, g)
		return err
	})
	if errors.Is(err, replica.ErrGC) {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(res)
	}
	would := ""
	if dry {
		would = "would be "
	}
	termsafe.Printf("remote %s: %d workspaces marked (server time %s, grace %s)\n", res.Remote, res.Workspaces, res.Now.Format(time.RFC3339), res.Grace)
	termsafe.Printf("%sdeleted: %s; %d un-condemned (reached again)\n", would, gcSet(res.Deleted), res.Revived)
	if r := res.Repacked; r.Packs > 0 && dry {
		termsafe.Printf("would be repacked: %d packs (%s) at least half dead; %s of live objects to copy\n", r.Packs, human(r.PackBytes), human(r.LiveBytes))
	} else if r.Packs > 0 {
		termsafe.Printf("repacked: %d packs (%s) at least half dead, condemned in the list; %s of live objects copied into %d new packs (%s)\n",
			r.Packs, human(r.PackBytes), human(r.LiveBytes), r.Written, human(r.WrittenBytes))
	}
	termsafe.Printf("%scondemned: %s", would, gcSet(res.Condemned))
	for _, l := range res.Lists {
		termsafe.Printf(" in %s", l)
	}
	termsafe.Printf("\n")
	if res.Pending.Packs+res.Pending.Segments > 0 {
		termsafe.Printf("waiting for the grace: %s\n", gcSet(res.Pending))
	}
	termsafe.Printf("kept %d packs (%s) with live objects; %s in them is reached by nothing (what a repack would free)\n", res.Kept, human(res.KeptBytes), human(res.DeadBytes))
	if res.Pins+res.PinsRemoved > 0 {
		termsafe.Printf("lazy clones' pins: %d (keeping %d packs nothing else reaches); %d expired pins %sremoved\n", res.Pins, res.PinnedPacks, res.PinsRemoved, would)
	}
	return nil
}

func gcSet(s replica.GCSet) string {
	return fmt.Sprintf("%d packs (%s), %d segments (%s)", s.Packs, human(s.PackBytes), s.Segments, human(s.SegmentBytes))
}

package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
	"github.com/reynfs/reynfs/cmd/reynfs/termsafe"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind/replica"
)

// The read side of remotes: fsck --remote, log --remote, fetch, and the
// remotes paragraph of status.

// resolveRemote opens the remote arg names: a URL (it has "://"), or a
// remote name of the workspace's store, looked up mounted or not
// (remote.list: through the daemon when one serves the store). The
// remote is read here, with this environment's credentials.
func resolveRemote(ctx context.Context, o storeOptions, dir, arg, verb string) (objstore.Backend, error) {
	if strings.Contains(arg, "://") {
		return openRemote(ctx, arg)
	}
	if err := replica.CheckName(arg); err != nil {
		return nil, fmt.Errorf("%w: --remote takes a remote name or a URL: %v", errUsage, err)
	}
	rs, err := remoteList(ctx, o, dir)
	if err != nil {
		return nil, fmt.Errorf("%s: look up the remote name %s (or give its URL): %w", verb, arg, err)
	}
	r, ok := remoteNamed(rs, arg)
	if !ok {
		return nil, fmt.Errorf("%w: no remote %s ('reynfs remote list' names them)", errUsage, arg)
	}
	return openRemote(ctx, r.URL)
}

// runFsckRemote is fsck --remote: exit 0 sound, 1 damage listed, 4 not
// a reynfs remote.
func runFsckRemote(ctx context.Context, o fsckOptions, dir string) error {
	if o.salvage != "" || o.repair {
		return fmt.Errorf("%w: fsck --remote takes neither --salvage nor --repair (it only reads the remote)", errUsage)
	}
	b, err := resolveRemote(ctx, o.storeOptions, dir, o.remote, "fsck --remote")
	if err != nil {
		return err
	}
	var rep *replica.FsckReport
	err = busy(!o.asJSON, "checking "+b.String(), func() error {
		rep, err = replica.Fsck(ctx, b, o.ws)
		return err
	})
	if err != nil {
		if strings.Contains(err.Error(), "holds no reynfs remote") {
			return &codedError{msg: oneLine(err.Error()), code: exitStore}
		}
		return err
	}
	if o.asJSON {
		if err := printJSON(rep); err != nil {
			return err
		}
	} else {
		for _, p := range rep.Problems {
			termsafe.Printf("DAMAGE %s\n", p)
		}
		state := "clean"
		if rep.Damaged() {
			state = fmt.Sprintf("DAMAGED (%d problems)", len(rep.Problems))
		}
		termsafe.Printf("remote %s: %s: %d workspaces, %d segments (%d records), %d packs, %d objects re-hashed, %s read\n",
			rep.Remote, state, rep.Workspaces, rep.Segments, rep.Records, rep.Packs, rep.Objects, human(rep.Bytes))
	}
	if rep.Damaged() {
		return fmt.Errorf("%w: remote %s (details above)", errDamaged, rep.Remote)
	}
	return nil
}

// logRemoteWS is log --remote --ws's JSON.
type logRemoteWS struct {
	replica.WorkspaceInfo
	Gens []replica.GenerationRef `json:"gens"`
}

func runLogRemote(ctx context.Context, o storeOptions, dir, remote, ws string, asJSON bool) error {
	b, err := resolveRemote(ctx, o, dir, remote, "log --remote")
	if err != nil {
		return err
	}
	if ws != "" {
		if err := replica.CheckName(ws); err != nil {
			return fmt.Errorf("%w: --ws %v", errUsage, err)
		}
		h, _, err := replica.ReadHead(ctx, b, ws)
		if err != nil {
			return err
		}
		gens, err := replica.Generations(ctx, b, ws, h)
		if err != nil {
			return err
		}
		if asJSON {
			return printJSON(logRemoteWS{WorkspaceInfo: replica.WorkspaceInfo{Name: ws, Seq: h.Seq, Floor: h.Floor,
				Epoch: h.Epoch(), Holder: h.Holder, Expires: h.Expires, Parent: h.Parent}, Gens: gens})
		}
		termsafe.Printf("%s#%s head seq %d\n", b, ws, h.Seq)
		for i := len(gens) - 1; i >= 0; i-- { // newest first, as 'reynfs log'
			g := gens[i]
			label := g.Label
			if label != "" {
				label = fmt.Sprintf("%q", label)
			}
			termsafe.Printf("* g%-4d seq %-8d %-9s %s  %s\n", g.ID, g.Seq, g.Kind, g.Time.Local().Format(time.DateTime), label)
		}
		return nil
	}
	ws2, err := replica.Workspaces(ctx, b, false)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(ws2)
	}
	if len(ws2) == 0 {
		termsafe.Printf("%s holds no workspace\n", b)
		return nil
	}
	for _, w := range ws2 {
		termsafe.Println(workspaceLine(w))
	}
	return nil
}

// workspaceLine is one workspace of log --remote.
func workspaceLine(w replica.WorkspaceInfo) string {
	if w.Error != "" && w.Seq == 0 {
		return fmt.Sprintf("%-16s DAMAGED: %s", w.Name, w.Error)
	}
	lease := "free"
	if w.Locked {
		lease = fmt.Sprintf("locked by %s pid %d until %s", w.Holder.Host, w.Holder.Pid, w.Expires.Local().Format(time.DateTime))
	}
	s := fmt.Sprintf("%-16s seq %-8d epoch %d  %s", w.Name, w.Seq, w.Epoch, lease)
	if w.Parent != nil {
		s += fmt.Sprintf("  fork of %s at seq %d", w.Parent.WS, w.Parent.Seq)
	}
	s += fmt.Sprintf("  %d generations", w.Generations)
	if g := w.Newest; g != nil {
		s += fmt.Sprintf(", newest g%d %q %s", g.ID, g.Label, g.Time.Local().Format(time.DateTime))
	}
	if w.Error != "" {
		s += "  DAMAGED: " + w.Error
	}
	return s
}

type fetchOptions struct {
	remoteOptions
	all bool
}

func newFetchCommand() *cobra.Command {
	var o fetchOptions
	cmd := &cobra.Command{
		Use:   "fetch [NAME] [--all]",
		Short: "Bring a cloned workspace up to date with its remote (unmounted)",
		Long: `Bring the records the remote NAME (default "origin", the remote a clone names) holds
after what this store holds, with the objects they reach, into the store, which was
made by 'reynfs clone'. The store's head becomes the remote's; the next mount serves it
and writes it into the project directory (as after a rewind of an unmounted store).
A store with records of its own after the clone (changes made in it, or the reset
record of 'clone --at') has diverged and is refused: 'reynfs fork' makes its history a
workspace of its own.

--all reads every workspace's HEAD (head seq, epoch, lease) and prints it, fetching no
data ('reynfs log --remote' also lists the generations); it runs mounted or not.

A mounted workspace does not fetch (it writes its own workspace: 'reynfs push', 'reynfs
sync'): unmount it first.

` + exitCodeHelp,
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := "origin"
			if len(args) == 1 {
				name = args[0]
			}
			return runFetch(cmd.Context(), o, name)
		},
	}
	o.addFlags(cmd)
	cmd.Flags().BoolVar(&o.all, "all", false, "read every workspace's HEAD, no data")
	return cmd
}

func runFetch(ctx context.Context, o fetchOptions, name string) error {
	if err := replica.CheckName(name); err != nil {
		return fmt.Errorf("%w: remote %v", errUsage, err)
	}
	if o.all {
		// Only HEADs are read: no store access beyond the remote's URL,
		// so it runs mounted or not.
		b, err := resolveRemote(ctx, o.storeOptions, o.dir, name, "fetch --all")
		if err != nil {
			return err
		}
		ws, err := replica.Workspaces(ctx, b, true)
		if err != nil {
			return err
		}
		if o.asJSON {
			return printJSON(ws)
		}
		for _, w := range ws {
			termsafe.Println(strings.TrimSuffix(workspaceLine(w), "  0 generations"))
		}
		return nil
	}
	// A fetch appends the remote's records under their own seqs beneath
	// the live tree: that is a clone catching up, unmounted. A mounted
	// store writes its own workspace (push and sync send it).
	if store, err := findStore(o.storeOptions, o.dir); err == nil {
		if m, ok := daemon.MountOfStore(store); ok {
			return fmt.Errorf("%w: fetch brings an unmounted clone up to date, and %s is mounted at %s (its own records go out with 'reynfs push' or 'reynfs sync'): 'reynfs unmount' first; 'reynfs fetch --all' and 'reynfs log --remote' read the remote while mounted",
				journal.ErrLocked, store, m.Point)
		}
	}
	j, _, err := openUnmounted(ctx, o.storeOptions, o.dir, "fetch", false)
	if err != nil {
		return err
	}
	defer j.Close()
	rs, err := replica.Remotes(j)
	if err != nil {
		return err
	}
	b, u, err := openNamedRemote(ctx, rs, name, "'reynfs remote list' names them; a clone names its remote origin")
	if err != nil {
		return err
	}
	got, err := replica.FetchedWorkspaces(ctx, j, b)
	if err != nil {
		return err
	}
	if len(got) != 1 {
		return fmt.Errorf("%w: this store was cloned from %d workspaces of %s; fetch brings a clone up to date", errUsage, len(got), u)
	}
	var ws string
	for ws = range got {
	}
	var res *replica.FetchResult
	err = busy(!o.asJSON, "fetching from "+name, func() error {
		res, err = replica.Fetch(ctx, j, b, ws)
		return err
	})
	if err != nil {
		if errors.Is(err, replica.ErrDiverged) {
			return &codedError{msg: oneLine(err.Error()), code: exitFailure}
		}
		return err
	}
	if res.From > 0 {
		if err := daemon.ReserveInodes(j); err != nil {
			return err
		}
	}
	if o.asJSON {
		return printJSON(res)
	}
	if res.From == 0 {
		termsafe.Printf("%s#%s: up to date (seq %d)\n", u, ws, res.Through)
		return nil
	}
	termsafe.Printf("fetched seqs %d-%d from %s#%s: %d records, %d objects in %d packs, %s; the next mount serves seq %d\n",
		res.From, res.Through, u, ws, res.Records, res.Objects, res.Packs, human(res.Bytes), res.Through)
	return nil
}

// remoteLags is status's remotes paragraph of an unmounted store: per
// remote, from the store's bookkeeping and the remote's config only.
type remoteLag struct {
	Name  string        `json:"name"`
	URL   string        `json:"url"`
	WS    []replica.Lag `json:"ws"`
	Error string        `json:"error,omitempty"`
}

func remoteLags(ctx context.Context, j *journal.Journal) ([]remoteLag, error) {
	rs, err := replica.Remotes(j)
	if err != nil {
		return nil, err
	}
	out := []remoteLag{}
	for _, n := range replica.RemoteNames(rs) {
		r := remoteLag{Name: n, URL: rs[n], WS: []replica.Lag{}}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		b, err := objstore.Open(cctx, rs[n])
		if err == nil {
			var l []replica.Lag
			if l, err = replica.Lags(cctx, j, b); err == nil && l != nil {
				r.WS = l
			}
		}
		cancel()
		if err != nil {
			r.Error = oneLine(err.Error())
		}
		out = append(out, r)
	}
	return out, nil
}

func printRemoteLags(ls []remoteLag) {
	for _, r := range ls {
		if r.Error != "" {
			termsafe.Printf("remote:   %s %s: unreadable: %s\n", r.Name, r.URL, r.Error)
			continue
		}
		if len(r.WS) == 0 {
			termsafe.Printf("remote:   %s %s: nothing pushed or fetched\n", r.Name, r.URL)
		}
		for _, w := range r.WS {
			what := fmt.Sprintf("shipped seq %d", w.Shipped)
			if w.Fetched > 0 && w.Shipped == 0 {
				what = fmt.Sprintf("cloned/fetched seq %d", w.Fetched)
			}
			termsafe.Printf("remote:   %s#%s %s, %d records behind head %d (%s of records, objects not counted)\n",
				r.Name, w.WS, what, w.Records, w.Head, human(w.RecordBytes))
		}
	}
}

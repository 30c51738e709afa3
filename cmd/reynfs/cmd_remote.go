package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/cmd/reynfs/daemon"
	"github.com/reynfs/reynfs/cmd/reynfs/termsafe"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind/replica"
)

const remoteURLHelp = `A remote URL is file:///ABSOLUTE/DIR (a local or shared directory),
s3://HOST[:PORT]/BUCKET[/PREFIX] or s3+http://HOST:PORT/BUCKET[/PREFIX] (S3 credentials
from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE; never in the URL, never
stored in the store).`

// openNamedRemote opens the remote the store names name (rs: its
// remotes), and returns its URL too; hint ends the usage error when the
// store names none.
func openNamedRemote(ctx context.Context, rs map[string]string, name, hint string) (objstore.Backend, string, error) {
	u, ok := rs[name]
	if !ok {
		return nil, "", fmt.Errorf("%w: no remote %s (%s)", errUsage, name, hint)
	}
	b, err := openRemote(ctx, u)
	return b, u, err
}

// openRemote opens the object store a remote URL names. objstore.Open
// makes no request: what it refuses is the URL (or a missing directory).
func openRemote(ctx context.Context, raw string) (objstore.Backend, error) {
	b, err := objstore.Open(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	return b, nil
}

// openUnmounted opens a workspace's store for a command that works on an
// unmounted store only (an unmounted push, fetch): a mount or a daemon
// serving it is refused, as fsck refuses it. The remote commands go
// through call() instead (the daemon when mounted).
func openUnmounted(ctx context.Context, o storeOptions, dir, verb string, readOnly bool) (*journal.Journal, string, error) {
	store, err := findStore(o, dir)
	if err != nil {
		return nil, "", err
	}
	if m, ok := daemon.MountOfStore(store); ok {
		return nil, "", fmt.Errorf("%w: %s works on an unmounted store for now and %s is mounted at %s; run `reynfs unmount` first", journal.ErrLocked, verb, store, m.Point)
	}
	if err := daemon.Call(ctx, store, api.StatusParams{}, nil, 10*time.Second); !errors.Is(err, daemon.ErrNotRunning) {
		if ctx.Err() != nil {
			return nil, "", err
		}
		return nil, "", fmt.Errorf("%w: %s works on an unmounted store for now and %s is served by a daemon; run `reynfs unmount` first", journal.ErrLocked, verb, store)
	}
	j, err := openOffline(dir, store, readOnly)
	return j, store, err
}

type remoteOptions struct {
	storeOptions
	dir    string
	asJSON bool
}

func (o *remoteOptions) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.dir, "dir", ".", "the project directory (or a path inside it)")
	cmd.Flags().StringVar(&o.store, "store", "", "store folder of the workspace")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print JSON")
}

func newRemoteCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "remote add|list|remove",
		Short: "Name the object stores a workspace pushes to",
		Long:  remoteURLHelp + "\n\n" + exitCodeHelp,
	}
	var add, list, remove remoteOptions
	addCmd := &cobra.Command{
		Use:   "add NAME URL",
		Short: "Name a remote after checking its server's conditional writes",
		Long: `Check the server behind URL (conditional writes, listing, ranged reads: a server
that ignores If-None-Match or If-Match cannot hold a workspace's lease and is refused)
and store NAME → URL in the workspace's store, mounted or not (through its daemon when
mounted: the check runs here, with this environment's credentials; the daemon reaches
the remote later with those of the environment it was mounted from).

` + remoteURLHelp + "\n\n" + exitCodeHelp,
		Args: usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRemoteAdd(cmd.Context(), add, args[0], args[1])
		},
	}
	add.addFlags(addCmd)
	listCmd := &cobra.Command{
		Use:   "list",
		Short: "List the named remotes",
		Long:  exitCodeHelp,
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRemoteList(cmd.Context(), list)
		},
	}
	list.addFlags(listCmd)
	removeCmd := &cobra.Command{
		Use:   "remove NAME",
		Short: "Forget a remote's name (the remote keeps what it holds)",
		Long: `Forget the remote NAME's name (mounted or not). The remote a continuous sync ships to
is refused: 'reynfs sync --manual' turns the sync off first.

` + exitCodeHelp,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRemoteRemove(cmd.Context(), remove, args[0])
		},
	}
	remove.addFlags(removeCmd)
	cmd.AddCommand(addCmd, listCmd, removeCmd)
	return cmd
}

type remoteInfo struct {
	Name string `json:"name"`
	URL  string `json:"url"`
}

// remoteList lists the store's remotes, mounted (through the daemon)
// or not: the one place the CLI learns a remote's URL from its name.
func remoteList(ctx context.Context, o storeOptions, dir string) ([]api.Remote, error) {
	var res api.RemoteListResult
	if err := call(ctx, o, dir, api.RemoteListParams{}, &res); err != nil {
		return nil, err
	}
	return res.Remotes, nil
}

// remoteNamed finds name among rs.
func remoteNamed(rs []api.Remote, name string) (api.Remote, bool) {
	for _, r := range rs {
		if r.Name == name {
			return r, true
		}
	}
	return api.Remote{}, false
}

func runRemoteAdd(ctx context.Context, o remoteOptions, name, raw string) error {
	if err := replica.CheckName(name); err != nil {
		return fmt.Errorf("%w: remote %v", errUsage, err)
	}
	b, err := openRemote(ctx, raw)
	if err != nil {
		return err
	}
	rs, err := remoteList(ctx, o.storeOptions, o.dir)
	if err != nil {
		return err
	}
	if r, ok := remoteNamed(rs, name); ok {
		return fmt.Errorf("%w: remote %s exists already (%s); 'reynfs remote remove %s' first", errUsage, name, r.URL, name)
	}
	// The self-test runs here, with this environment's credentials, as
	// unmounted; the daemon is sent only the name and URL.
	if err := objstore.SelfTest(ctx, b); err != nil {
		return fmt.Errorf("remote %s: %w", b, err)
	}
	var res api.RemoteResult
	if err := call(ctx, o.storeOptions, o.dir, api.RemoteAddParams{Name: name, URL: b.String()}, &res); err != nil {
		return err
	}
	if o.asJSON {
		return printJSON(remoteInfo{Name: name, URL: res.Remote.URL})
	}
	termsafe.Printf("remote %s: %s\n", name, res.Remote.URL)
	return nil
}

func runRemoteList(ctx context.Context, o remoteOptions) error {
	rs, err := remoteList(ctx, o.storeOptions, o.dir)
	if err != nil {
		return err
	}
	if o.asJSON {
		out := []remoteInfo{}
		for _, r := range rs {
			out = append(out, remoteInfo{Name: r.Name, URL: r.URL})
		}
		return printJSON(out)
	}
	for _, r := range rs {
		if r.Sync != "" {
			termsafe.Printf("%s\t%s\t(%s sync of %s)\n", r.Name, r.URL, r.Sync, r.WS)
			continue
		}
		termsafe.Printf("%s\t%s\n", r.Name, r.URL)
	}
	return nil
}

func runRemoteRemove(ctx context.Context, o remoteOptions, name string) error {
	if err := replica.CheckName(name); err != nil {
		return fmt.Errorf("%w: remote %v", errUsage, err)
	}
	var res api.RemoteResult
	if err := call(ctx, o.storeOptions, o.dir, api.RemoteRemoveParams{Name: name}, &res); err != nil {
		return err
	}
	if o.asJSON {
		return printJSON(remoteInfo{Name: name})
	}
	termsafe.Printf("removed remote %s\n", name)
	return nil
}

type pushOptions struct {
	remoteOptions
	ws string
}

// leaseTTLEnv sets the lease's TTL of a push (default 60 s): tests
// shorten it.
const leaseTTLEnv = "REYNFS_LEASE_TTL"

func newPushCommand() *cobra.Command {
	var o pushOptions
	cmd := &cobra.Command{
		Use:   "push [NAME] [--ws WS]",
		Short: "Send the workspace's history to a remote (mounted or not)",
		Long: `Send what the remote NAME lacks of this workspace's history: the records after the
remote's head and the objects they reach that it does not hold (found from the store's
own record of what it sent, without asking the server object by object). NAME may be
left out when the store names one remote. WS is the workspace's name in the remote:
by default the project directory's base name. The push holds the workspace's lease on
the remote while it runs, renewing it; a workspace pushed by another store is refused,
and so is one whose lease another writer holds ("remote locked by ...") or that
another store took over ('reynfs clone --take'): a deposed store's records after the
takeover are not in WS, and 'reynfs push --ws NEW' keeps them as a new workspace.

Mounted, the daemon pushes from the live journal (buffered writes first made durable);
with a continuous sync to NAME running ('reynfs mount --sync continuous') it waits
for the sync to ship the durable head instead.

` + exitCodeHelp,
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			return runPush(cmd.Context(), o, name)
		},
	}
	o.addFlags(cmd)
	cmd.Flags().StringVar(&o.ws, "ws", "", "the workspace's name in the remote (default: the project directory's base name)")
	return cmd
}

// remoteWorkspace is the workspace's name in a remote: ws (--ws), or
// the project directory's base name; checked.
func remoteWorkspace(dir, ws string) (string, error) {
	if ws == "" {
		abs, err := absPath(dir)
		if err != nil {
			return "", err
		}
		ws = filepath.Base(abs)
	}
	if err := replica.CheckName(ws); err != nil {
		return "", fmt.Errorf("%w: workspace %v (--ws names it)", errUsage, err)
	}
	return ws, nil
}

func runPush(ctx context.Context, o pushOptions, name string) error {
	if o.ws != "" {
		if err := replica.CheckName(o.ws); err != nil {
			return fmt.Errorf("%w: workspace %v (--ws names it)", errUsage, err)
		}
	}
	if done, err := pushMounted(ctx, o, name); done || err != nil {
		return err
	}
	ws, err := remoteWorkspace(o.dir, o.ws)
	if err != nil {
		return err
	}
	j, _, err := openUnmounted(ctx, o.storeOptions, o.dir, "push", false)
	if err != nil {
		return err
	}
	defer j.Close()
	rs, err := replica.Remotes(j)
	if err != nil {
		return err
	}
	if name == "" {
		names := replica.RemoteNames(rs)
		if len(names) != 1 {
			return fmt.Errorf("%w: push NAME: the store names %d remotes (%s)", errUsage, len(names), strings.Join(names, ", "))
		}
		name = names[0]
	}
	b, u, err := openNamedRemote(ctx, rs, name, fmt.Sprintf("'reynfs remote add %s URL' names one", name))
	if err != nil {
		return err
	}
	var ttl time.Duration // the lease's; tests shorten it
	if v := os.Getenv(leaseTTLEnv); v != "" {
		if ttl, err = time.ParseDuration(v); err != nil || ttl <= 0 {
			return fmt.Errorf("%w: %s=%q: want a positive duration", errUsage, leaseTTLEnv, v)
		}
	}
	var res *replica.PushResult
	err = busy(!o.asJSON, "pushing to "+name, func() error {
		res, err = replica.PushWith(ctx, j, b, ws, replica.Options{TTL: ttl})
		return err
	})
	if err != nil {
		return err
	}
	if o.asJSON {
		return printJSON(res)
	}
	names := ""
	if res.Names > 0 {
		names = fmt.Sprintf("; %d branch names", res.Names)
	}
	if res.From == 0 {
		termsafe.Printf("%s#%s is up to date (seq %d)%s\n", u, ws, res.Through, names)
		return nil
	}
	termsafe.Printf("pushed seqs %d-%d to %s#%s: %d records in %d segments, %d objects in %d packs, %s%s\n",
		res.From, res.Through, u, ws, res.Records, res.Segments, res.Objects, res.Packs, human(res.Bytes), names)
	if res.CompactError != "" {
		termsafe.Fprintf(os.Stderr, "reynfs: warning: merging the remote's segments stopped short (%s); the next push merges again\n", res.CompactError)
	}
	return nil
}

// pushMounted pushes through the daemon when one serves the store; done
// reports whether it did (or failed there).
func pushMounted(ctx context.Context, o pushOptions, name string) (bool, error) {
	store, err := findStore(o.storeOptions, o.dir)
	if err != nil {
		return true, err
	}
	var resp api.PushResult
	err = busy(!o.asJSON, "pushing", func() error {
		return daemon.Call(ctx, store, api.PushParams{Remote: name, WS: o.ws}, &resp, 0)
	})
	if errors.Is(err, daemon.ErrNotRunning) {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	res := resp.Push
	if o.asJSON {
		return true, printJSON(res)
	}
	names := ""
	if res.Names > 0 {
		names = fmt.Sprintf("; %d branch names", res.Names)
	}
	switch {
	case res.Continuous:
		termsafe.Printf("%s#%s holds seq %d (shipped by the continuous sync)\n", res.Remote, res.WS, res.Through)
	case res.From == 0:
		termsafe.Printf("%s#%s is up to date (seq %d)%s\n", res.Remote, res.WS, res.Through, names)
	default:
		termsafe.Printf("pushed seqs %d-%d to %s#%s: %d records in %d segments, %d objects in %d packs, %s%s\n",
			res.From, res.Through, res.Remote, res.WS, res.Records, res.Segments, res.Objects, res.Packs, human(res.Bytes), names)
	}
	return true, nil
}

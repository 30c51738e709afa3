package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/rewind"
)

// The control socket speaks the protocol of agents/api (docs/api.md):
// JSON-RPC 2.0, one object per line, many calls per connection. This file
// holds the socket and the client side; dispatch.go turns a request into
// a call of the Service or the Daemon.

// Status describes a running daemon.
type Status = api.Status

// Gen describes a generation that was cut.
type Gen = api.Gen

// listen opens the control socket at path, 0600 in a private directory
// whatever the umask (the directory keeps others out while the mode is
// set; the peer check in serve keeps them out even where both failed).
func listen(path string) (net.Listener, error) {
	if err := ensureSocketDir(path); err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil && fi.Mode().Type() != os.ModeSocket {
		return nil, fmt.Errorf("%w: control socket %s exists and is not a socket: refusing", ErrUsage, path)
	}
	_ = os.Remove(path) // a socket left by a killed daemon; the store lock says we own it
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	// The path is in a directory only we can write: no symlink can have
	// replaced the socket between the bind and the chmod.
	if err := os.Chmod(path, 0o600); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return ln, nil
}

func (d *Daemon) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		d.handlers.Add(1)
		go func() {
			defer d.handlers.Done()
			d.serve(c)
		}()
	}
}

// serve answers one connection, if its peer is the mount's owner or root
// (DESIGN invariant 10); anyone else gets one line saying no, and the
// attempt is logged with who made it.
func (d *Daemon) serve(c net.Conn) {
	defer c.Close()
	owner := uint32(os.Geteuid())
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return
	}
	cred, err := api.PeerCred(uc)
	if err != nil {
		d.log.Error().Err(err).Msg("control socket: cannot tell who connected; refused")
		return
	}
	if !api.Trusted(cred.Uid, owner) {
		d.log.Warn().Uint32("uid", cred.Uid).Int32("pid", cred.Pid).Msg("control socket: refused a caller who is neither the mount's owner nor root")
		resp := errorResponse(nil, &api.Error{Code: api.CodeServer,
			Message: fmt.Sprintf("control socket: uid %d is neither the mount's owner (uid %d) nor root: refused", cred.Uid, owner),
			Data:    api.ErrorData{Kind: api.KindPermissionDenied, Exit: api.KindPermissionDenied.Exit()}})
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		_ = json.NewEncoder(c).Encode(resp)
		return
	}
	d.handle(c, cred.Pid)
}

// handle answers the calls of one trusted connection, one at a time,
// until the client closes it or the daemon finishes; peer is the pid of
// the process that connected (SO_PEERCRED), whose run an agent save names.
func (d *Daemon) handle(c net.Conn, peer int32) {
	// The daemon finishing wakes a connection idle in its read (a kept
	// connection must not hold up the exit); a reply being written still
	// goes out.
	idle := make(chan struct{})
	defer close(idle)
	go func() {
		select {
		case <-d.done:
			_ = c.SetReadDeadline(time.Unix(1, 0))
		case <-idle:
		}
	}()
	dec := json.NewDecoder(bufio.NewReader(c))
	enc := json.NewEncoder(c)
	for {
		var req api.Request
		if err := dec.Decode(&req); err != nil {
			var syn *json.SyntaxError
			var typ *json.UnmarshalTypeError
			if errors.As(err, &syn) || errors.As(err, &typ) {
				_ = enc.Encode(errorResponse(nil, &api.Error{Code: api.CodeParse, Message: fmt.Sprintf("control socket: parse request: %v", err),
					Data: api.ErrorData{Kind: api.KindBadInput, Exit: api.KindBadInput.Exit()}}))
			}
			return
		}
		select {
		case <-d.done:
			return // the store is closed: nothing left to answer with
		default:
		}
		if len(req.ID) != 0 && clientGone(c) {
			// Queued while the daemon was stopped or busy, its client was
			// interrupted (Ctrl-C, exit 130): carrying it out now would
			// contradict what the client reported.
			d.log.Warn().Str("method", req.Method).Msg("control socket: the client gave up before its request ran; not carried out")
			return
		}
		if req.Method == (api.SubscribeParams{}).Method() {
			// The connection becomes the event stream (subscribe.go).
			p, err := params[api.SubscribeParams](req.Params)
			resp := dispatchFrom(d.svc, d, &req, peer)
			if err != nil || resp.Error != nil || len(req.ID) == 0 {
				_ = enc.Encode(resp)
				return
			}
			if err := enc.Encode(resp); err != nil {
				return
			}
			d.subscribe(c, enc, p)
			return
		}
		ctx, stop := context.Background(), func() {}
		if len(req.ID) != 0 && waits(req.Method) {
			ctx, stop = d.watchClient(c) // Ctrl-C ends the wait (clientgone.go)
		}
		resp := dispatchCtx(ctx, d.svc, d, &req, peer)
		stop()
		if len(req.ID) == 0 {
			continue // a notification: no answer
		}
		if err := enc.Encode(resp); err != nil {
			return
		}
	}
}

func errorResponse(id json.RawMessage, e *api.Error) *api.Response {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	return &api.Response{JSONRPC: api.JSONRPC, ID: id, Error: e}
}

// clientGone reports whether the peer of c closed its end: a client keeps
// it open until it has the answer, so a closed end means it gave up.
func clientGone(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	gone := false
	_ = rc.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		gone = n == 0 && err == nil
	})
	return gone
}

func validKind(k string) bool {
	switch k {
	case rewind.KindTurn, rewind.KindPlanStep, rewind.KindPhase, rewind.KindManual, "tool":
		return true
	}
	return false
}

// Status reports the daemon's state.
func (d *Daemon) Status() (*Status, error) {
	objs, bytes, err := d.j.Objects().Stats()
	if err != nil {
		return nil, err
	}
	size, err := DiskUsage(DBPath(d.cfg.Store))
	if err != nil {
		return nil, err
	}
	inodes, buffered := d.live.Counts()
	mode, why := d.runs.Mode()
	remotes, err := d.remoteStatus()
	if err != nil {
		return nil, err
	}
	return &Status{
		Mounted: true, Dir: d.cfg.Dir, Mountpoint: d.cfg.Mountpoint, Store: d.cfg.Store, Pid: os.Getpid(),
		HeadSeq: d.j.Head(), Records: d.j.Head(), Objects: objs, ObjectBytes: bytes,
		StoreBytes: size, Inodes: inodes, Buffered: buffered,
		Uptime:    time.Since(d.started).Round(time.Second).String(),
		ViewsName: d.views, PrivateHistory: d.private,
		RunMode: string(mode), RunModeReason: why, Remotes: remotes, Lazy: d.lazyStatus(),
		Follow: d.followStatus(),
	}, nil
}

// ErrNotRunning: no daemon answers on the store's control socket.
var ErrNotRunning = errors.New("no reynfs daemon is serving this store")

// Call makes one call to the daemon of store and decodes its result into
// res. It gives up when ctx ends (Ctrl-C) or after timeout (0: no limit).
// It talks only to a daemon run by this user or root: a socket in a
// directory someone else made, or served by someone else, is refused, so
// a server planted by another user cannot answer in the daemon's place.
// An error the daemon answered comes back as ErrorOf makes it.
func Call(ctx context.Context, store string, p api.Params, res any, timeout time.Duration) error {
	paths := socketPaths(store)
	path := paths[0]
	for _, p := range paths {
		if err := checkSocketDir(p); err != nil {
			return fmt.Errorf("control socket %s: %w", p, err)
		}
		if _, err := os.Lstat(p); err == nil {
			path = p
			break
		}
	}
	c, err := api.Dial(ctx, path)
	if errors.Is(err, api.ErrNoServer) {
		return fmt.Errorf("%w (%s)", ErrNotRunning, store)
	}
	if err != nil {
		return err
	}
	defer c.Close()
	if timeout > 0 {
		_ = c.SetDeadline(time.Now().Add(timeout))
	}
	err = c.Do(ctx, p, res)
	if errors.Is(err, api.ErrClosed) {
		// Closed without an answer: the daemon died while we waited
		// (a connection it had queued but never accepted).
		return fmt.Errorf("%w (%s): the daemon closed the connection without answering", ErrNotRunning, store)
	}
	return ErrorOf(err)
}

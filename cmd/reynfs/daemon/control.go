package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/reynfs/reynfs/agents"
	"github.com/reynfs/reynfs/rewind"
)

// Request is one control-socket request: a JSON line.
type Request struct {
	Op     string `json:"op"` // status unmount checkpoint log diff show export rewind
	Label  string `json:"label,omitempty"`
	Kind   string `json:"kind,omitempty"`
	Target string `json:"target,omitempty"`
	Other  string `json:"other,omitempty"` // diff: the second state
	Dir    string `json:"dir,omitempty"`   // export: destination
	Path   string `json:"path,omitempty"`  // restore: path below the workspace root
	Dry    bool   `json:"dry,omitempty"`
	All    bool   `json:"all,omitempty"`
	WAL    bool   `json:"wal,omitempty"`
	Patch  bool   `json:"patch,omitempty"` // diff: unified diff of the files
	Data   []byte `json:"data,omitempty"`  // agent-save: the state
	Keep   int    `json:"keep,omitempty"`  // gc: generations to keep
}

// Response is the JSON line answering a Request.
type Response struct {
	Error      string                `json:"error,omitempty"`
	Code       int                   `json:"code,omitempty"` // the error's class, see ErrorOf
	Status     *Status               `json:"status,omitempty"`
	Generation *Gen                  `json:"generation,omitempty"`
	Log        *LogResult            `json:"log,omitempty"`
	Changes    []rewind.Change       `json:"changes,omitempty"`
	Patch      string                `json:"patch,omitempty"`
	Agents     []AgentState          `json:"agents,omitempty"`
	GC         *rewind.RetainResult  `json:"gc,omitempty"`
	Data       []byte                `json:"data,omitempty"`
	Rewind     *rewind.Result        `json:"rewind,omitempty"`
	Restore    *rewind.RestoreResult `json:"restore,omitempty"`
	Record     *RecordLine           `json:"record,omitempty"`
	Gen        *LogEntry             `json:"gen,omitempty"`
	Seq        uint64                `json:"seq,omitempty"`
}

// Status describes a running daemon.
type Status struct {
	Mounted     bool   `json:"mounted"`
	Dir         string `json:"dir"`
	Mountpoint  string `json:"mountpoint"`
	Store       string `json:"store"`
	Pid         int    `json:"pid"`
	HeadSeq     uint64 `json:"head_seq"`
	Records     uint64 `json:"records"`
	Objects     int64  `json:"objects"`
	ObjectBytes int64  `json:"object_bytes"`
	StoreBytes  int64  `json:"store_bytes"`
	Inodes      int    `json:"inodes"`
	Buffered    int    `json:"buffered_bytes"`
	Uptime      string `json:"uptime"`
	// ViewsName is the name of the history views in the mount root
	// (mount --views-name, remembered in the store).
	ViewsName string `json:"views_name"`
	// PrivateHistory: only the mount's owner and root may browse the
	// views (mount --private-history, remembered in the store).
	PrivateHistory bool `json:"private_history"`
}

// Gen describes a generation that was cut.
type Gen struct {
	ID    int           `json:"id"` // gN
	Took  time.Duration `json:"took_ns"`
	Seq   uint64        `json:"seq"`
	Kind  string        `json:"kind"`
	Label string        `json:"label"`
	Root  string        `json:"root"`
}

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
	cred, err := peerCred(uc)
	if err != nil {
		d.log.Error().Err(err).Msg("control socket: cannot tell who connected; refused")
		return
	}
	if !trusted(cred.Uid, owner) {
		d.log.Warn().Uint32("uid", cred.Uid).Int32("pid", cred.Pid).Msg("control socket: refused a caller who is neither the mount's owner nor root")
		resp := &Response{Code: codeDenied, Error: fmt.Sprintf("control socket: uid %d is neither the mount's owner (uid %d) nor root: refused", cred.Uid, owner)}
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		_ = json.NewEncoder(c).Encode(resp)
		return
	}
	d.handle(c)
}

func (d *Daemon) handle(c net.Conn) {
	var req Request
	if err := json.NewDecoder(bufio.NewReader(c)).Decode(&req); err != nil {
		return
	}
	if clientGone(c) {
		// Queued while the daemon was stopped or busy, its client was
		// interrupted (Ctrl-C, exit 130): carrying it out now would
		// contradict what the client reported.
		d.log.Warn().Str("op", req.Op).Msg("control socket: the client gave up before its request ran; not carried out")
		return
	}
	var resp *Response
	switch req.Op {
	case "status":
		resp = &Response{}
		st, err := d.Status()
		resp.Status = st
		setErr(resp, err)
	case "checkpoint":
		resp = &Response{}
		kind := req.Kind
		if kind == "" {
			kind = rewind.KindManual
		}
		if !validKind(kind) {
			setErr(resp, fmt.Errorf("%w: --kind %q: want turn, plan-step, phase or manual", ErrUsage, kind))
			break
		}
		start := time.Now()
		g, err := d.svc.RW.Cut(kind, req.Label)
		took := time.Since(start)
		var id int
		if err == nil {
			id, err = rewind.GenerationID(d.j, g.Seq)
		}
		if err == nil {
			resp.Generation = &Gen{ID: id, Took: took, Seq: g.Seq, Kind: g.GenKind, Label: g.Label, Root: g.Root.String()}
		}
		setErr(resp, err)
	case "unmount":
		resp = &Response{}
		setErr(resp, d.Unmount())
	default:
		resp = Handle(d.svc, req)
	}
	_ = json.NewEncoder(c).Encode(resp)
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
	case rewind.KindTurn, rewind.KindPlanStep, rewind.KindPhase, rewind.KindManual:
		return true
	}
	return false
}

// Handle answers the requests a Service serves (mounted or not).
func Handle(s *Service, req Request) *Response {
	resp := &Response{}
	var err error
	switch req.Op {
	case "log":
		resp.Log, err = s.Log(req.All, req.WAL)
	case "diff":
		resp.Changes, resp.Patch, err = s.Diff(req.Target, req.Other, req.Patch)
	case "show":
		resp.Record, resp.Gen, err = s.Show(req.Target)
	case "export":
		resp.Seq, err = s.Export(req.Target, req.Dir)
	case "rewind":
		resp.Rewind, err = s.Rewind(req.Target, req.Dry)
	case "store-status":
		if s.Live != nil {
			err = fmt.Errorf("%w: store-status is for an unmounted store", ErrUsage)
			break
		}
		resp.Status, err = s.StoreStatus(req.Dir)
	case "gc":
		resp.GC, err = s.GC(req.Keep, req.Dry)
	case "agent-save":
		resp.Seq, err = s.AgentSave(req.Label, req.Data)
	case "agent-list":
		resp.Agents, resp.Seq, err = s.AgentStates(req.Target)
	case "agent-show":
		resp.Data, err = s.AgentShow(req.Label, req.Target)
	case "restore":
		resp.Restore, err = s.Restore(req.Path, req.Target)
	default:
		err = fmt.Errorf("%w: unknown request %q", ErrUsage, req.Op)
	}
	setErr(resp, err)
	return resp
}

func setErr(r *Response, err error) {
	if err != nil {
		r.Error = err.Error()
		r.Code = codeOf(err)
	}
}

// Error classes carried over the socket, so the CLI exits as it would
// have for the same error in-process.
const (
	codeFailure = iota + 1
	codeUsage
	codeTarget
	codeDenied
)

func codeOf(err error) int {
	switch {
	case errors.Is(err, ErrUsage), errors.Is(err, agents.ErrName), errors.Is(err, agents.ErrTooBig):
		return codeUsage
	case errors.Is(err, rewind.ErrTarget):
		return codeTarget
	case errors.Is(err, ErrDenied):
		return codeDenied
	}
	return codeFailure
}

// ErrorOf rebuilds an error answered over the socket with its class.
func ErrorOf(r *Response) error {
	if r.Error == "" {
		return nil
	}
	switch r.Code {
	case codeUsage:
		return fmt.Errorf("%w: %s", ErrUsage, strings.TrimPrefix(r.Error, "usage: "))
	case codeTarget:
		return fmt.Errorf("%w: %s", rewind.ErrTarget, strings.TrimPrefix(r.Error, "bad target: "))
	case codeDenied:
		return fmt.Errorf("%w: %s", ErrDenied, r.Error)
	}
	return errors.New(r.Error)
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
	return &Status{
		Mounted: true, Dir: d.cfg.Dir, Mountpoint: d.cfg.Mountpoint, Store: d.cfg.Store, Pid: os.Getpid(),
		HeadSeq: d.j.Head(), Records: d.j.Head(), Objects: objs, ObjectBytes: bytes,
		StoreBytes: size, Inodes: inodes, Buffered: buffered,
		Uptime:    time.Since(d.started).Round(time.Second).String(),
		ViewsName: d.views, PrivateHistory: d.private,
	}, nil
}

// ErrNotRunning: no daemon answers on the store's control socket.
var ErrNotRunning = errors.New("no reynfs daemon is serving this store")

// Call sends one request to the daemon of store and returns its answer. It
// gives up when ctx ends (Ctrl-C) or after timeout (0: no limit). It talks
// only to a daemon run by this user or root: a socket in a directory
// someone else made, or served by someone else, is refused, so a server
// planted by another user cannot answer in the daemon's place.
func Call(ctx context.Context, store string, req Request, timeout time.Duration) (*Response, error) {
	paths := socketPaths(store)
	path := paths[0]
	for _, p := range paths {
		if err := checkSocketDir(p); err != nil {
			return nil, fmt.Errorf("control socket %s: %w", p, err)
		}
		if _, err := os.Lstat(p); err == nil {
			path = p
			break
		}
	}
	dialer := net.Dialer{Timeout: 5 * time.Second}
	nc, err := dialer.DialContext(ctx, "unix", path)
	switch {
	case ctx.Err() != nil:
		if nc != nil {
			nc.Close()
		}
		return nil, fmt.Errorf("control socket: %w", context.Cause(ctx))
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return nil, fmt.Errorf("%w: control socket %s: the daemon belongs to another user", ErrDenied, path)
	case err != nil:
		return nil, fmt.Errorf("%w (%s)", ErrNotRunning, store)
	}
	c := nc.(*net.UnixConn)
	defer c.Close()
	cred, err := peerCred(c)
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	if me := uint32(os.Geteuid()); !trusted(cred.Uid, me) {
		return nil, fmt.Errorf("%w: control socket %s is served by uid %d (pid %d), not by you (uid %d) or root: refusing", ErrDenied, path, cred.Uid, cred.Pid, me)
	}
	if timeout > 0 {
		_ = c.SetDeadline(time.Now().Add(timeout))
	}
	// Ctrl-C: a deadline in the past wakes the read or write below.
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	var resp Response
	// A daemon that refuses us answers at once and closes, maybe before
	// the request is written: its answer is still there to read.
	werr := json.NewEncoder(c).Encode(&req)
	err = json.NewDecoder(c).Decode(&resp)
	if err != nil && werr != nil {
		err = werr
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("control socket: %w", context.Cause(ctx))
		}
		if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
			errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			// Closed without an answer: the daemon died while we
			// waited (a connection it had queued but never accepted).
			return nil, fmt.Errorf("%w (%s): the daemon closed the connection without answering", ErrNotRunning, store)
		}
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return &resp, ErrorOf(&resp)
}

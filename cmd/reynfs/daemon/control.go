package daemon

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
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

func listen(path string) (net.Listener, error) {
	if err := ensureSocketDir(path); err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	_ = os.Remove(path) // a socket left by a killed daemon; the store lock says we own it
	ln, err := net.Listen("unix", path)
	if err != nil {
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
			d.handle(c)
		}()
	}
}

func (d *Daemon) handle(c net.Conn) {
	defer c.Close()
	var req Request
	if err := json.NewDecoder(bufio.NewReader(c)).Decode(&req); err != nil {
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
)

func codeOf(err error) int {
	switch {
	case errors.Is(err, ErrUsage), errors.Is(err, agents.ErrName), errors.Is(err, agents.ErrTooBig):
		return codeUsage
	case errors.Is(err, rewind.ErrTarget):
		return codeTarget
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
		Uptime: time.Since(d.started).Round(time.Second).String(),
	}, nil
}

// ErrNotRunning: no daemon answers on the store's control socket.
var ErrNotRunning = errors.New("no reynfs daemon is serving this store")

// Call sends one request to the daemon of store and returns its answer.
func Call(store string, req Request, timeout time.Duration) (*Response, error) {
	c, err := net.DialTimeout("unix", SocketPath(store), 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", ErrNotRunning, store)
	}
	defer c.Close()
	if timeout > 0 {
		_ = c.SetDeadline(time.Now().Add(timeout))
	}
	if err := json.NewEncoder(c).Encode(&req); err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	var resp Response
	if err := json.NewDecoder(c).Decode(&resp); err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return &resp, ErrorOf(&resp)
}

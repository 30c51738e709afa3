package daemon

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/reynfs/reynfs/rewind"
)

// Request is one control-socket request: a JSON line.
type Request struct {
	Op    string `json:"op"` // status | unmount | checkpoint
	Label string `json:"label,omitempty"`
	Kind  string `json:"kind,omitempty"`
}

// Response is the JSON line answering a Request.
type Response struct {
	Error      string  `json:"error,omitempty"`
	Status     *Status `json:"status,omitempty"`
	Generation *Gen    `json:"generation,omitempty"`
}

// Status describes a running daemon.
type Status struct {
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
	Seq   uint64 `json:"seq"`
	Kind  string `json:"kind"`
	Label string `json:"label"`
	Root  string `json:"root"`
}

func listen(path string) (net.Listener, error) {
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
		go d.handle(c)
	}
}

func (d *Daemon) handle(c net.Conn) {
	defer c.Close()
	var req Request
	if err := json.NewDecoder(bufio.NewReader(c)).Decode(&req); err != nil {
		return
	}
	var resp Response
	switch req.Op {
	case "status":
		st, err := d.Status()
		resp.Status = st
		setErr(&resp, err)
	case "checkpoint":
		kind := req.Kind
		if kind == "" {
			kind = rewind.KindManual
		}
		g, err := rewind.Cut(d.j, d.live, kind, req.Label)
		if err == nil {
			resp.Generation = &Gen{Seq: g.Seq, Kind: g.GenKind, Label: g.Label, Root: g.Root.String()}
		}
		setErr(&resp, err)
	case "unmount":
		setErr(&resp, d.Unmount())
	default:
		resp.Error = fmt.Sprintf("unknown request %q", req.Op)
	}
	_ = json.NewEncoder(c).Encode(&resp)
}

func setErr(r *Response, err error) {
	if err != nil {
		r.Error = err.Error()
	}
}

// Status reports the daemon's state.
func (d *Daemon) Status() (*Status, error) {
	objs, bytes, err := d.j.Objects().Stats()
	if err != nil {
		return nil, err
	}
	lsm, vlog := d.j.DB().Size()
	inodes, buffered := d.live.Counts()
	return &Status{
		Dir: d.cfg.Dir, Mountpoint: d.cfg.Mountpoint, Store: d.cfg.Store, Pid: os.Getpid(),
		HeadSeq: d.j.Head(), Records: d.j.Head(), Objects: objs, ObjectBytes: bytes,
		StoreBytes: lsm + vlog, Inodes: inodes, Buffered: buffered,
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
	if resp.Error != "" {
		return &resp, errors.New(resp.Error)
	}
	return &resp, nil
}

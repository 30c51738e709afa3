package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Client is one connection to a daemon. Its calls are serialized: one is
// answered before the next is sent.
type Client struct {
	c    *net.UnixConn
	path string
	enc  *json.Encoder
	r    *bufio.Reader
	mu   sync.Mutex
	id   uint64
}

// Dial connects to the control socket at path. It talks only to a daemon
// run by this user or root (SO_PEERCRED): a server someone else planted
// where the daemon's socket should be is refused (ErrDenied), so it cannot
// answer in the daemon's place. Nothing listening is ErrNoServer.
func Dial(ctx context.Context, path string) (*Client, error) {
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
		return nil, fmt.Errorf("%w: %s: %v", ErrNoServer, path, err)
	}
	c := nc.(*net.UnixConn)
	cred, err := PeerCred(c)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	if me := uint32(os.Geteuid()); !Trusted(cred.Uid, me) {
		c.Close()
		return nil, fmt.Errorf("%w: control socket %s is served by uid %d (pid %d), not by you (uid %d) or root: refusing", ErrDenied, path, cred.Uid, cred.Pid, me)
	}
	return &Client{c: c, path: path, enc: json.NewEncoder(c), r: bufio.NewReader(c)}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.c.Close() }

// SetDeadline bounds every call from now on (the zero time: no bound).
func (c *Client) SetDeadline(t time.Time) error { return c.c.SetDeadline(t) }

// Do calls p's method and decodes the result into res (nil: discard).
// An error the daemon answered is an *Error (its kind says which); one
// that ends the connection first is ErrClosed, or ctx's cause when ctx
// ended (Ctrl-C).
func (c *Client) Do(ctx context.Context, p Params, res any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.id++
	params, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode %s: %w", p.Method(), err)
	}
	id := json.RawMessage(strconv.FormatUint(c.id, 10))
	// Ctrl-C: a deadline in the past wakes the read or write below.
	stop := context.AfterFunc(ctx, func() { _ = c.c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	// A daemon that refuses us answers at once and closes, maybe before
	// the request is written: its answer is still there to read.
	werr := c.enc.Encode(&Request{JSONRPC: JSONRPC, ID: id, Method: p.Method(), Params: params})
	var resp Response
	err = c.readResponse(&resp)
	if err != nil && werr != nil {
		err = werr
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("control socket: %w", context.Cause(ctx))
		}
		if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
			errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return ErrClosed
		}
		return fmt.Errorf("control socket: %w", err)
	}
	if resp.Error != nil {
		return resp.Error
	}
	if !bytes.Equal(resp.ID, id) {
		return fmt.Errorf("control socket: answer to call %s arrived for call %s", resp.ID, id)
	}
	if res == nil || len(resp.Result) == 0 {
		return nil
	}
	if err := json.Unmarshal(resp.Result, res); err != nil {
		return fmt.Errorf("decode %s reply: %w", p.Method(), err)
	}
	return nil
}

// readResponse reads the next line that is a response (a later protocol
// may interleave notifications; they are skipped here).
func (c *Client) readResponse(resp *Response) error {
	for {
		line, err := c.r.ReadBytes('\n')
		if err != nil {
			if len(line) == 0 || !errors.Is(err, io.EOF) {
				return err
			}
		}
		var probe struct {
			Method string          `json:"method"`
			ID     json.RawMessage `json:"id"`
		}
		if jerr := json.Unmarshal(line, &probe); jerr != nil {
			return fmt.Errorf("bad answer: %w", jerr)
		}
		if probe.Method != "" && len(probe.ID) == 0 {
			continue // a notification
		}
		return json.Unmarshal(line, resp)
	}
}

// Hello settles the protocol version: the one both sides speak.
func (c *Client) Hello(ctx context.Context, client string) (*HelloResult, error) {
	var r HelloResult
	err := c.Do(ctx, HelloParams{Version: Version, Client: client}, &r)
	return &r, err
}

// Status describes the daemon.
func (c *Client) Status(ctx context.Context) (*StatusResult, error) {
	var r StatusResult
	err := c.Do(ctx, StatusParams{}, &r)
	return &r, err
}

// Checkpoint cuts a generation.
func (c *Client) Checkpoint(ctx context.Context, p CheckpointParams) (*CheckpointResult, error) {
	var r CheckpointResult
	err := c.Do(ctx, p, &r)
	return &r, err
}

// Rewind brings the workspace back to a state.
func (c *Client) Rewind(ctx context.Context, p RewindParams) (*RewindResult, error) {
	var r RewindResult
	err := c.Do(ctx, p, &r)
	return &r, err
}

// Log lists the timeline.
func (c *Client) Log(ctx context.Context, p LogParams) (*LogReply, error) {
	var r LogReply
	err := c.Do(ctx, p, &r)
	return &r, err
}

// AgentSave saves an agent's state.
func (c *Client) AgentSave(ctx context.Context, name string, data []byte) (*SeqResult, error) {
	var r SeqResult
	err := c.Do(ctx, AgentSaveParams{Name: name, Data: data}, &r)
	return &r, err
}

// PeerCred returns the credentials of the process at the other end of a
// unix socket (for a client, the server as it was when it listened).
func PeerCred(c syscall.Conn) (*unix.Ucred, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	if cerr != nil {
		return nil, fmt.Errorf("SO_PEERCRED: %w", cerr)
	}
	return cred, nil
}

// Trusted reports whether uid may talk to a daemon run by owner, or serve
// a client run by owner: the same user, or root.
func Trusted(uid, owner uint32) bool { return uid == owner || uid == 0 }

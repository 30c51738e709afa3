package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/reynfs/reynfs/agents"
	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
)

// dispatch answers one request of the control API: the one place a method
// name becomes a call, for the daemon (d set) and for the CLI on an
// unmounted store (d nil, s on the store opened directly).
func dispatch(s *Service, d *Daemon, req *api.Request) *api.Response {
	return dispatchFrom(s, d, req, 0)
}

// dispatchFrom is dispatch for a request from process peer (0: unknown).
func dispatchFrom(s *Service, d *Daemon, req *api.Request, peer int32) *api.Response {
	return dispatchCtx(context.Background(), s, d, req, peer)
}

// dispatchCtx is dispatchFrom with the context of the call: the control
// socket cancels it when the client goes away (push and sync stop
// waiting; control.go).
func dispatchCtx(ctx context.Context, s *Service, d *Daemon, req *api.Request, peer int32) *api.Response {
	id := req.ID
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	if req.JSONRPC != api.JSONRPC {
		return errorResponse(id, &api.Error{Code: api.CodeInvalidRequest,
			Message: fmt.Sprintf("control socket: request is not JSON-RPC %s (jsonrpc %q)", api.JSONRPC, req.JSONRPC),
			Data:    api.ErrorData{Kind: api.KindBadInput, Exit: api.KindBadInput.Exit()}})
	}
	res, err := guardedCall(ctx, s, d, peer, req)
	var h *api.Head
	if res != nil {
		h = res.At() // unmount notes it before the store closes
	}
	if h == nil {
		if hd, herr := headOf(s.J); herr == nil {
			h = &hd
			if res != nil {
				res.SetHead(hd)
			}
		}
	}
	if err != nil {
		e := toError(err)
		e.Data.Head = h
		return errorResponse(id, e)
	}
	b, err := json.Marshal(res)
	if err != nil {
		return errorResponse(id, toError(fmt.Errorf("encode %s reply: %w", req.Method, err)))
	}
	return &api.Response{JSONRPC: api.JSONRPC, ID: id, Result: b}
}

// guardedCall is call, with a panic in a read-only method (a bug in
// formatting a reply, say) answered as an internal error instead of
// ending the daemon and with it the mount. A panic in a method that
// changes the workspace is not survived: it may have left the live tree
// half changed, and serving that would be worse than stopping (the
// journal holds every acknowledged change; the next mount recovers). Its
// stack goes to the daemon's log either way.
func guardedCall(ctx context.Context, s *Service, d *Daemon, peer int32, req *api.Request) (res api.Result, err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		stack := string(debug.Stack())
		if d != nil {
			d.log.Error().Str("method", req.Method).Str("panic", fmt.Sprint(r)).Str("stack", stack).Msg("control socket: a handler panicked")
		}
		if !api.MethodReadOnly(req.Method) {
			panic(r)
		}
		res, err = nil, &api.Error{Code: api.CodeServer,
			Message: oneLine(fmt.Sprintf("%s: internal error: %v (the daemon's log has the stack); please report it", req.Method, r)),
			Data:    api.ErrorData{Kind: api.KindInternal, Exit: api.KindInternal.Exit()}}
	}()
	if err := followerRefuses(s, d, req.Method, req.Params); err != nil { // follow.go
		return nil, err
	}
	return call(ctx, s, d, peer, req.Method, req.Params)
}

// oneLine keeps the first line of s.
func oneLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// params decodes a request's parameters (none: the zero value).
func params[P any](raw json.RawMessage) (P, error) {
	var p P
	if len(raw) == 0 || string(raw) == "null" {
		return p, nil
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return p, fmt.Errorf("%w: params: %v", ErrUsage, err)
	}
	return p, nil
}

// errNeedsDaemon answers a method only a mounted workspace serves.
func errNeedsDaemon(method string) error {
	return fmt.Errorf("%w: %s needs the workspace mounted", ErrNotRunning, method)
}

func call(ctx context.Context, s *Service, d *Daemon, peer int32, method string, raw json.RawMessage) (api.Result, error) {
	switch method {
	case api.HelloParams{}.Method():
		p, err := params[api.HelloParams](raw)
		if err != nil {
			return nil, err
		}
		v, err := api.Negotiate(p.Version)
		return &api.HelloResult{Version: v, Mounted: d != nil}, err
	case api.VersionParams{}.Method():
		return &api.VersionResult{Build: api.ThisBuild()}, nil
	case api.StatusParams{}.Method():
		if d == nil {
			return nil, errNeedsDaemon(method)
		}
		st, err := d.Status()
		return &api.StatusResult{Status: st}, err
	case api.CheckpointParams{}.Method():
		if d == nil {
			return nil, errNeedsDaemon(method)
		}
		p, err := params[api.CheckpointParams](raw)
		if err != nil {
			return nil, err
		}
		if err := d.notRewinding("checkpoint"); err != nil {
			return nil, err
		}
		return result(d.checkpoint(p, d.origin(peer)))
	case api.UnmountParams{}.Method():
		if d == nil {
			return nil, errNeedsDaemon(method)
		}
		r := &api.UnmountResult{}
		if h, err := headOf(s.J); err == nil {
			r.SetHead(h) // the store is closed once unmounted
		}
		err := d.Unmount()
		if d.syncWarn != "" {
			r.Warnings = append(r.Warnings, d.syncWarn)
		}
		return r, err
	case api.PushParams{}.Method():
		if d == nil {
			return nil, errNeedsDaemon(method)
		}
		p, err := params[api.PushParams](raw)
		if err != nil {
			return nil, err
		}
		info, err := d.Push(ctx, p)
		return &api.PushResult{Push: info}, err
	case api.SyncParams{}.Method():
		if d == nil {
			return nil, errNeedsDaemon(method)
		}
		p, err := params[api.SyncParams](raw)
		if err != nil {
			return nil, err
		}
		return result(d.Sync(ctx, p))
	case api.SyncModeParams{}.Method():
		if d == nil {
			return nil, errNeedsDaemon(method)
		}
		p, err := params[api.SyncModeParams](raw)
		if err != nil {
			return nil, err
		}
		return result(d.SetSyncMode(ctx, p))
	case api.ForgetParams{}.Method():
		if d == nil {
			return nil, errNeedsDaemon(method)
		}
		p, err := params[api.ForgetParams](raw)
		if err != nil {
			return nil, err
		}
		info, err := d.Forget(ctx, p)
		return &api.ForgetResult{Forget: info}, err
	case api.RemoteListParams{}.Method():
		return result(remoteList(s, d))
	case api.RemoteAddParams{}.Method():
		p, err := params[api.RemoteAddParams](raw)
		if err != nil {
			return nil, err
		}
		return result(remoteAdd(ctx, s, p))
	case api.RemoteRemoveParams{}.Method():
		p, err := params[api.RemoteRemoveParams](raw)
		if err != nil {
			return nil, err
		}
		return result(remoteRemove(s, d, p))
	case api.SubscribeParams{}.Method():
		// The stream itself is the connection's (control.go): here only
		// the checks and the reply.
		if d == nil {
			return nil, errNeedsDaemon(method)
		}
		if _, err := params[api.SubscribeParams](raw); err != nil {
			return nil, err
		}
		return &api.SubscribeResult{}, nil
	case api.StoreStatusParams{}.Method():
		p, err := params[api.StoreStatusParams](raw)
		if err != nil {
			return nil, err
		}
		if s.Live != nil {
			return nil, fmt.Errorf("%w: store-status is for an unmounted store", ErrUsage)
		}
		st, err := s.StoreStatus(p.Store)
		return &api.StatusResult{Status: st}, err
	case api.LogParams{}.Method():
		p, err := params[api.LogParams](raw)
		if err != nil {
			return nil, err
		}
		p.WAL = p.WAL || p.Run != ""
		l, err := s.LogOf(p)
		if err == nil && p.Run != "" {
			onlyRun(l, p.Run)
		}
		return &api.LogReply{Log: l}, err
	case api.DiffParams{}.Method():
		p, err := params[api.DiffParams](raw)
		if err != nil {
			return nil, err
		}
		r := &api.DiffResult{}
		r.Changes, r.Patch, err = s.DiffOf(p)
		return r, err
	case api.ShowParams{}.Method():
		p, err := params[api.ShowParams](raw)
		if err != nil {
			return nil, err
		}
		r := &api.ShowResult{}
		r.Record, r.Gen, err = s.Show(p.Target)
		return r, err
	case api.ExportParams{}.Method():
		p, err := params[api.ExportParams](raw)
		if err != nil {
			return nil, err
		}
		r := &api.SeqResult{}
		r.Seq, err = s.Export(p.Target, p.Dir)
		return r, err
	case api.RewindParams{}.Method():
		p, err := params[api.RewindParams](raw)
		if err != nil {
			return nil, err
		}
		if d != nil {
			what := "rewind"
			if p.Dry {
				what = "a dry rewind"
			}
			if err := d.notRewinding(what); err != nil {
				return nil, err // before the target: the workspace is moving under it
			}
		}
		if d != nil || p.Dry {
			// Offline, the project directory's changes since the unmount
			// are recorded first: rewindOffline checks after that.
			r, err := s.rewindNoOp(p.Target)
			if err != nil {
				return nil, err // a nil *RewindResult in the interface would not be nil
			}
			if r != nil {
				return r, nil
			}
		}
		if d != nil && !p.Dry {
			return result(d.rewind(p))
		}
		r := &api.RewindResult{}
		r.Rewind, err = s.Rewind(p.Target, p.Dry)
		r.Already = err == nil && !p.Dry && r.Rewind.Reset == 0
		return r, err
	case api.RestoreParams{}.Method():
		p, err := params[api.RestoreParams](raw)
		if err != nil {
			return nil, err
		}
		if d != nil {
			if err := d.notRewinding("restore"); err != nil {
				return nil, err
			}
		}
		r := &api.RestoreResult{}
		if p.Dry {
			r.Restore, r.Changes, err = s.RestoreDry(p.Path, p.Target)
			return r, err
		}
		r.Restore, err = s.Restore(p.Path, p.Target)
		return r, err
	case api.GCParams{}.Method():
		p, err := params[api.GCParams](raw)
		if err != nil {
			return nil, err
		}
		r := &api.GCResult{}
		r.GC, err = s.GC(p.Keep, p.Dry)
		return r, err
	case api.RetentionParams{}.Method():
		p, err := params[api.RetentionParams](raw)
		if err != nil {
			return nil, err
		}
		r := &api.RetentionResult{}
		r.Retention, err = s.Retention(p.Seqs, p.Generations, p.Every, p.Default)
		return r, err
	case api.RunStartParams{}.Method(), api.RunAttachParams{}.Method(), api.RunExitedParams{}.Method(), api.RunsParams{}.Method():
		if d == nil {
			return nil, errNeedsDaemon(method)
		}
		return d.callRun(method, raw)
	case api.AgentSaveParams{}.Method():
		p, err := params[api.AgentSaveParams](raw)
		if err != nil {
			return nil, err
		}
		r := &api.SeqResult{}
		if d != nil {
			r.Seq, err = s.AgentSaveFrom(d.origin(peer), p.Name, p.Data)
		} else {
			r.Seq, err = s.AgentSave(p.Name, p.Data)
		}
		return r, err
	case api.AgentListParams{}.Method():
		p, err := params[api.AgentListParams](raw)
		if err != nil {
			return nil, err
		}
		r := &api.AgentListResult{}
		r.Agents, r.Seq, err = s.AgentStates(p.At)
		return r, err
	case api.AgentShowParams{}.Method():
		p, err := params[api.AgentShowParams](raw)
		if err != nil {
			return nil, err
		}
		r := &api.AgentShowResult{}
		r.Data, err = s.AgentShow(p.Name, p.At)
		return r, err
	}
	if r, err, ok := callOps(s, d, method, raw); ok {
		return r, err
	}
	return nil, &api.Error{Code: api.CodeMethodNotFound, Message: fmt.Sprintf("usage: unknown request %q", method),
		Data: api.ErrorData{Kind: api.KindBadInput, Exit: api.KindBadInput.Exit()}}
}

// checkpoint cuts a generation on behalf of o, the process that asked
// (a hook inside a `reynfs run` names its run and agent on the record).
func (d *Daemon) checkpoint(p api.CheckpointParams, o agents.Origin) (*api.CheckpointResult, error) {
	kind := p.Kind
	if kind == "" {
		kind = rewind.KindManual
	}
	if !validKind(kind) {
		return nil, fmt.Errorf("%w: --kind %q: want turn, tool, plan-step, phase or manual", ErrUsage, kind)
	}
	start := time.Now()
	g, err := d.svc.RW.CutNamedBy(kind, p.Label, p.Unique, o)
	took := time.Since(start)
	if err != nil {
		return nil, err
	}
	id, err := rewind.GenerationID(d.j, g.Seq)
	if err != nil {
		return nil, err
	}
	return &api.CheckpointResult{Generation: &Gen{ID: id, Took: took, Seq: g.Seq, Kind: g.GenKind, Label: g.Label, Root: g.Root.String()}}, nil
}

// headOf is where the store stands: its newest record, newest generation
// and the number of rewinds it has seen. Every reply carries it, so both
// come from counts kept in memory (rewind.NewestGeneration,
// journal.ResetCount), not from listing every generation and reset.
func headOf(j *journal.Journal) (api.Head, error) {
	h := api.Head{Seq: j.Head()}
	_, id, ok, err := rewind.NewestGeneration(j)
	if err != nil {
		return h, err
	}
	if ok {
		h.Gen = id
	}
	if h.Epoch, err = j.ResetCount(); err != nil {
		return h, err
	}
	return h, nil
}

// kindOf classifies an error by the sentinels it wraps.
func kindOf(err error) api.Kind {
	switch {
	case errors.Is(err, ErrUsage), errors.Is(err, agents.ErrName), errors.Is(err, agents.ErrTooBig),
		errors.Is(err, rewind.ErrName), errors.Is(err, rewind.ErrNothing):
		return api.KindBadInput
	case errors.Is(err, rewind.ErrNotRetained):
		return api.KindNotRetained
	case errors.Is(err, rewind.ErrTarget):
		return api.KindBadTarget
	case errors.Is(err, ErrDenied):
		return api.KindPermissionDenied
	case errors.Is(err, journal.ErrLocked):
		return api.KindStoreLocked
	case errors.Is(err, journal.ErrCorrupt), errors.Is(err, journal.ErrFormat), errors.Is(err, cas.ErrCorrupt):
		return api.KindStoreCorrupt
	case errors.Is(err, ErrStale):
		return api.KindStaleMount
	case errors.Is(err, ErrNotRunning):
		return api.KindNotMounted
	}
	return api.KindFailed
}

func toError(err error) *api.Error {
	var e *api.Error
	if errors.As(err, &e) {
		return e
	}
	k := kindOf(err)
	return &api.Error{Code: api.CodeServer, Message: err.Error(), Data: api.ErrorData{Kind: k, Exit: k.Exit()}}
}

// remoteError is an error the daemon answered: its message as sent, and
// the sentinel of its kind, so the CLI exits as it would have for the
// same error in-process; the answer itself stays in the chain, so that
// api.KindOf still names its kind (runs_active has no sentinel).
type remoteError struct {
	msg  string
	kind error
	e    *api.Error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() []error {
	if e.kind == nil {
		return []error{e.e}
	}
	return []error{e.kind, e.e}
}

// ErrorOf rebuilds an error answered by the control API with the sentinel
// of its kind; any other error is returned as it is.
func ErrorOf(err error) error {
	var e *api.Error
	if !errors.As(err, &e) {
		return err
	}
	var sentinel error
	switch e.Data.Kind {
	case api.KindBadInput, api.KindUnsupportedProtocol:
		sentinel = ErrUsage
	case api.KindBadTarget:
		sentinel = rewind.ErrTarget
	case api.KindNotRetained:
		sentinel = rewind.ErrNotRetained
	case api.KindPermissionDenied:
		msg := e.Message
		if !strings.HasPrefix(msg, ErrDenied.Error()) {
			msg = ErrDenied.Error() + ": " + msg
		}
		return &remoteError{msg: msg, kind: ErrDenied, e: e}
	case api.KindStoreLocked:
		sentinel = journal.ErrLocked
	case api.KindStoreCorrupt:
		sentinel = journal.ErrCorrupt
	case api.KindStaleMount:
		sentinel = ErrStale
	case api.KindNotMounted:
		sentinel = ErrNotRunning
	}
	return &remoteError{msg: e.Message, kind: sentinel, e: e}
}

// Serve answers one call on a store no daemon holds (the CLI's offline
// path), through the same dispatch as the socket.
func Serve(s *Service, p api.Params, res any) error {
	raw, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode %s: %w", p.Method(), err)
	}
	resp := dispatch(s, nil, &api.Request{JSONRPC: api.JSONRPC, ID: json.RawMessage("0"), Method: p.Method(), Params: raw})
	if resp.Error != nil {
		return ErrorOf(resp.Error)
	}
	if res == nil {
		return nil
	}
	if err := json.Unmarshal(resp.Result, res); err != nil {
		return fmt.Errorf("decode %s reply: %w", p.Method(), err)
	}
	return nil
}

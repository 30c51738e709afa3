package daemon

import (
	"encoding/json"
	"errors"
	"net"
	"sort"
	"sync/atomic"
	"time"

	"github.com/reynfs/reynfs/agents/api"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
)

// A subscription tails the journal: every ~100 ms it reads the records
// past the last one it reported (committed records, from the store, never
// the live tree: the file system never waits for a subscriber) and turns
// them into events. Events wait in a bounded buffer for the connection's
// writer; a subscriber too slow to keep it from filling is dropped with a
// last event saying so, and its write deadline bounds a stuck one.

const (
	eventTick     = 100 * time.Millisecond
	defaultBuffer = 256
	maxBuffer     = 4096
	eventWrite    = 5 * time.Second // a subscriber that takes longer to read one event is gone
	topInodes     = 8
)

// subscribe streams events on c until the subscriber goes, is dropped, or
// the daemon finishes. The subscribe reply has been sent.
func (d *Daemon) subscribe(c net.Conn, enc *json.Encoder, p api.SubscribeParams) {
	size := p.Buffer
	if size <= 0 {
		size = defaultBuffer
	}
	size = min(size, maxBuffer)
	events := make(chan api.Event, size)
	quit := make(chan struct{})
	var dropped atomic.Bool
	go func() {
		defer close(events)
		d.tail(events, quit, &dropped)
	}()
	defer func() {
		close(quit)
		for range events { // let the tail end
		}
	}()
	send := func(ev api.Event) error {
		_ = c.SetWriteDeadline(time.Now().Add(eventWrite))
		return enc.Encode(&api.Notification{JSONRPC: api.JSONRPC, Method: api.EventMethod, Params: ev})
	}
	for ev := range events {
		if err := send(ev); err != nil {
			return
		}
	}
	if dropped.Load() {
		h, _ := headOf(d.j)
		_ = send(api.Event{Type: api.EventDropped, Head: h, Reason: "the subscriber fell too far behind: its event buffer is full"})
	}
}

// tail sends init, then the events of the records as they are committed,
// until quit or the daemon finishes; a full buffer ends it with dropped set.
func (d *Daemon) tail(events chan<- api.Event, quit <-chan struct{}, dropped *atomic.Bool) {
	push := func(ev api.Event) bool {
		select {
		case events <- ev:
			return true
		default:
			dropped.Store(true)
			return false
		}
	}
	h, err := headOf(d.j)
	if err != nil {
		d.log.Error().Err(err).Msg("subscribe: read the head")
		return
	}
	if !push(api.Event{Type: api.EventInit, Head: h}) {
		return
	}
	last := h.Seq
	t := time.NewTicker(eventTick)
	defer t.Stop()
	rs := d.runEvents.add()
	defer d.runEvents.remove(rs)
	for {
		select {
		case <-quit:
			return
		case <-d.done:
			return
		case ev := <-rs.ch:
			if !push(ev) {
				return
			}
			continue
		case <-rs.lost:
			dropped.Store(true)
			return
		case <-t.C:
		}
		if d.j.Head() <= last {
			continue
		}
		evs, next, err := d.eventsAfter(last)
		if err != nil {
			d.log.Warn().Err(err).Msg("subscribe: read the journal")
			continue
		}
		last = next
		for _, ev := range evs {
			if !push(ev) {
				return
			}
		}
	}
}

// eventsAfter reads the committed records after seq and returns their
// events and the last seq they cover. A generation not indexed yet ends
// the batch before it (the next tick reports it with its id).
func (d *Daemon) eventsAfter(seq uint64) ([]api.Event, uint64, error) {
	var out []api.Event
	var w *api.WritesEvent
	inodes := map[uint64]int{}
	last := seq
	flush := func() {
		if w == nil {
			return
		}
		for ino, n := range inodes {
			w.Top = append(w.Top, api.InodeCount{Ino: ino, Records: n})
		}
		sort.Slice(w.Top, func(i, j int) bool {
			a, b := w.Top[i], w.Top[j]
			return a.Records > b.Records || a.Records == b.Records && a.Ino < b.Ino
		})
		if len(w.Top) > topInodes {
			w.Top = w.Top[:topInodes]
		}
		out = append(out, api.Event{Type: api.EventWrites, Writes: w})
		w, inodes = nil, map[uint64]int{}
	}
	err := d.j.Iter(seq+1, func(r *journal.Record) error {
		switch r.Op {
		case journal.OpGeneration:
			id, err := rewind.GenerationID(d.j, r.Seq)
			if err != nil {
				return errDone // indexed in a moment
			}
			flush()
			out = append(out, api.Event{Type: api.EventCheckpoint, Generation: &api.Gen{ID: id, Seq: r.Seq, Kind: r.GenKind, Label: r.Label, Root: r.Root.String()}})
		case journal.OpReset:
			flush()
			out = append(out, api.Event{Type: api.EventRewind, Rewind: rewindEvent(r)})
		default:
			if w == nil {
				w = &api.WritesEvent{FromSeq: r.Seq, Ops: map[string]int{}}
			}
			w.ToSeq = r.Seq
			w.Records++
			w.Ops[r.Op.String()]++
			if ino := recordInode(r); ino != 0 {
				inodes[ino]++
			}
		}
		last = r.Seq
		return nil
	})
	if err != nil && !errors.Is(err, errDone) {
		return nil, seq, err
	}
	flush()
	if len(out) > 0 {
		h, err := headOf(d.j)
		if err != nil {
			return nil, seq, err
		}
		for i := range out {
			out[i].Head = h
		}
	}
	return out, last, nil
}

// recordInode is the inode a record changed: its own, or for a name
// operation the directory whose entries changed.
func recordInode(r *journal.Record) uint64 {
	if r.Ino != 0 {
		return r.Ino
	}
	return r.Parent
}

// rewindEvent describes a reset record and the operation it is (every
// reset record is one: a rewind, an undo, a redo or a checkout).
func rewindEvent(r *journal.Record) *api.RewindEvent {
	ev := &api.RewindEvent{Seq: r.Seq, ToSeq: r.ResetTo, Supersedes: r.Supersedes}
	if op, ok := rewind.OpOfRecord(r); ok {
		ev.Op, ev.OpID, ev.Of, ev.Branch = op.Kind, op.ID, op.Of, op.Branch
	}
	return ev
}

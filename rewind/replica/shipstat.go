package replica

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/reynfs/reynfs/cas"
	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/journal"
)

// ShipStatus is what a Shipper reports.
type ShipStatus struct {
	Remote string `json:"remote"` // the backend's URL
	WS     string `json:"ws"`
	State  string `json:"state"` // starting, shipping, idle, backing-off, stopped
	// Since: when the state began.
	Since time.Time `json:"since"`
	// Shipped: the remote's HEAD covers every seq up to it (0 until the
	// shipper read HEAD: Known false).
	Shipped uint64 `json:"shipped"`
	Known   bool   `json:"known"`
	Durable uint64 `json:"durable"` // the store's durable head
	// LagRecords: seqs after Shipped up to Durable; LagSeconds: the age
	// of the oldest of their records (0 when none waits).
	LagRecords   uint64  `json:"lag_records"`
	LagSeconds   float64 `json:"lag_seconds"`
	PendingBytes int64   `json:"pending_bytes"` // estimate: records and the chunks they write
	LastError    string  `json:"last_error,omitempty"`
	Reason       string  `json:"reason,omitempty"` // why it stopped
	Requests     int64   `json:"requests"`         // requests sent since the start
	BytesSent    int64   `json:"bytes_sent"`
}

// Status reports the shipper's state and lag.
func (s *Shipper) Status() ShipStatus {
	durable := s.j.Durable()
	s.mu.Lock()
	st := ShipStatus{Remote: s.b.String(), WS: s.ws, State: s.state, Since: s.since,
		Shipped: s.shipped, Known: s.known, Durable: durable,
		Requests: s.b.requests.Load(), BytesSent: s.b.bytes.Load()}
	if s.lastErr != nil {
		st.LastError = s.lastErr.Error()
	}
	if s.reason != nil {
		st.Reason = s.reason.Error()
	}
	if s.known {
		st.PendingBytes = s.est.pendingFrom(s.shipped, durable)
	}
	s.mu.Unlock()
	if durable > st.Shipped {
		if st.State == ShipIdle {
			st.State = ShipShipping // due at the next tick: not idle
		}
		st.LagRecords = durable - st.Shipped
		if t, ok := s.oldestAfter(st.Shipped, durable); ok {
			st.LagSeconds = max(0, time.Since(t).Seconds())
		}
	}
	return st
}

// oldestAfter is the time of the first record after seq (up to limit).
func (s *Shipper) oldestAfter(seq, limit uint64) (time.Time, bool) {
	var t time.Time
	found := false
	errStop := errors.New("stop")
	_ = s.j.Iter(seq+1, func(r *journal.Record) error {
		if r.Seq <= limit {
			t, found = time.Unix(0, r.Time), true
		}
		return errStop
	})
	return t, found
}

// count adds the durable records not yet counted to the estimate.
func (s *Shipper) count(durable uint64) {
	s.mu.Lock()
	from, ok := s.est.counted+1, s.est.on
	s.mu.Unlock()
	if !ok || durable < from {
		return
	}
	var add int64
	errStop := errors.New("stop")
	err := s.j.Iter(from, func(r *journal.Record) error {
		if r.Seq > durable {
			return errStop
		}
		add += recordBytes(r)
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return
	}
	s.mu.Lock()
	s.est.add(durable, add)
	s.mu.Unlock()
}

func (s *Shipper) pending() int64 {
	durable := s.j.Durable()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.est.pendingFrom(s.shipped, durable)
}

// recordBytes estimates what shipping r costs: its encoding and the
// chunks it writes (a chunk at its slot's length in the file; dedup is
// not looked up).
func recordBytes(r *journal.Record) int64 {
	n := int64(r.EncodedLen())
	if r.Op == journal.OpData && r.Kind == journal.DataWrite {
		for _, c := range r.Chunks {
			if c.Hash.IsZero() {
				continue
			}
			off := c.Index * cas.ChunkSize
			if r.Size > off {
				n += int64(min(uint64(cas.ChunkSize), r.Size-off))
			}
		}
	}
	return n
}

// estimate is a running sum of recordBytes over the durable records,
// with marks (seq, sum through it) to subtract what was shipped.
type estimate struct {
	on      bool
	counted uint64
	sum     int64
	marks   []estMark
}

type estMark struct {
	seq uint64
	sum int64
}

func (e *estimate) start(shipped uint64) {
	if !e.on || e.counted < shipped {
		*e = estimate{on: true, counted: shipped, marks: []estMark{{shipped, 0}}}
	}
}

func (e *estimate) add(through uint64, n int64) {
	e.sum += n
	e.counted = through
	e.marks = append(e.marks, estMark{through, e.sum})
}

// pendingFrom is the sum after shipped: from the newest mark at or
// before it (marks below it are dropped).
func (e *estimate) pendingFrom(shipped, durable uint64) int64 {
	if !e.on || durable <= shipped {
		return 0
	}
	i := 0
	for i+1 < len(e.marks) && e.marks[i+1].seq <= shipped {
		i++
	}
	e.marks = e.marks[i:]
	if len(e.marks) == 0 {
		return e.sum
	}
	return max(0, e.sum-e.marks[0].sum)
}

// counting is a Backend that counts requests and bytes written.
type counting struct {
	objstore.Backend
	requests, bytes atomic.Int64
}

func (c *counting) Get(ctx context.Context, key string) ([]byte, objstore.Info, error) {
	c.requests.Add(1)
	return c.Backend.Get(ctx, key)
}

func (c *counting) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	c.requests.Add(1)
	return c.Backend.GetRange(ctx, key, off, n)
}

func (c *counting) Stat(ctx context.Context, key string) (objstore.Info, error) {
	c.requests.Add(1)
	return c.Backend.Stat(ctx, key)
}

func (c *counting) Put(ctx context.Context, key string, data []byte) error {
	c.requests.Add(1)
	c.bytes.Add(int64(len(data)))
	return c.Backend.Put(ctx, key, data)
}

func (c *counting) PutIfAbsent(ctx context.Context, key string, data []byte) (objstore.Info, error) {
	c.requests.Add(1)
	c.bytes.Add(int64(len(data)))
	return c.Backend.PutIfAbsent(ctx, key, data)
}

func (c *counting) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (objstore.Info, error) {
	c.requests.Add(1)
	c.bytes.Add(int64(len(data)))
	return c.Backend.PutIfMatch(ctx, key, data, etag)
}

func (c *counting) List(ctx context.Context, prefix string, fn func(objstore.Info) error) error {
	c.requests.Add(1)
	return c.Backend.List(ctx, prefix, fn)
}

func (c *counting) Delete(ctx context.Context, key string) error {
	c.requests.Add(1)
	return c.Backend.Delete(ctx, key)
}

func (c *counting) Now(ctx context.Context) (time.Time, error) {
	c.requests.Add(1)
	return c.Backend.Now(ctx)
}

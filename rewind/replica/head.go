package replica

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// Format is the remote format this reynfs reads and writes.
const Format = 1

// ConfigKey is the remote's configuration object.
const ConfigKey = "reynfs-remote.json"

// Config is reynfs-remote.json: the format, and a random id that names
// this remote in a store's bookkeeping (what it is known to hold), so a
// remote emptied and made again under the same URL is a new remote.
type Config struct {
	Format int    `json:"format"`
	ID     string `json:"id"`
}

func newConfig() (*Config, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("remote id: %w", err)
	}
	return &Config{Format: Format, ID: hex.EncodeToString(b[:])}, nil
}

// Encode returns the config's canonical JSON.
func (c *Config) Encode() []byte { return canonical(c) }

// DecodeConfig decodes reynfs-remote.json exactly (canonical JSON, known
// fields, this format).
func DecodeConfig(b []byte) (*Config, error) {
	var c Config
	if err := strict(ConfigKey, b, &c); err != nil {
		return nil, err
	}
	if c.Format != Format {
		return nil, fmt.Errorf("%s: remote format %d; this reynfs reads format %d", ConfigKey, c.Format, Format)
	}
	if id, err := hex.DecodeString(c.ID); err != nil || len(id) != 16 || hex.EncodeToString(id) != c.ID {
		return nil, fmt.Errorf("%s: %w: id %q", ConfigKey, ErrCorrupt, c.ID)
	}
	return &c, nil
}

// HeadKey names workspace ws's HEAD.
func HeadKey(ws string) string { return "ws/" + ws + "/HEAD" }

// Head is a workspace's HEAD: what the remote holds of it, and its lease.
type Head struct {
	Format int `json:"format"`
	// Seq: every record up to it is in a segment HEAD covers, and every
	// object those records reach is in a pack whose index is written.
	Seq uint64 `json:"seq"`
	// Floor is the first retained seq.
	Floor  uint64  `json:"floor"`
	Epochs []Epoch `json:"epochs"`
	// Holder is the lease's holder (and the store that writes the
	// workspace); the lease is held until Expires, in the server's time.
	Holder  Holder    `json:"holder"`
	Expires time.Time `json:"expires"`
	Parent  *Parent   `json:"parent,omitempty"`
	// Dropped: the writer's collections dropped Gens generations, all
	// below seq Below; generation ids (gN) count them, so a clone does.
	Dropped *Dropped `json:"dropped,omitempty"`
}

// Dropped counts the generations retention dropped before the floor.
type Dropped struct {
	Gens  int    `json:"gens"`
	Below uint64 `json:"below"`
}

// Epoch e's segments are valid from First up to the next epoch's First-1.
type Epoch struct {
	Epoch uint64 `json:"epoch"`
	First uint64 `json:"first"`
}

// Holder names a writer: its host, process and store id.
type Holder struct {
	Host  string `json:"host"`
	Pid   int    `json:"pid"`
	Store string `json:"store"`
}

// Parent is, for a fork, the workspace and seq it started from.
type Parent struct {
	WS  string `json:"ws"`
	Seq uint64 `json:"seq"`
}

// Start is the first seq a reader of the workspace reads: 1, or, once
// generations were dropped, the lower of the floor and the seq they were
// all dropped below. Below it the writer kept only reset records (and
// generation records its store no longer counts), which no retained
// state needs: a retained generation is its own base and the replay of
// a retained seq starts at a generation at or past the floor. Start
// never goes down (forget sets floor and dropped together; push keeps
// the larger dropped count). Segments wholly below Start are read by no
// reader of this workspace; a fork's reader reads its parent's from its
// own Start, whatever the parent's is now.
func (h *Head) Start() uint64 {
	if h.Dropped == nil {
		return 1
	}
	return max(1, min(h.Dropped.Below, h.Floor))
}

// Encode returns HEAD's canonical JSON.
func (h *Head) Encode() []byte { return canonical(h) }

// Epoch returns the current (last) epoch.
func (h *Head) Epoch() uint64 { return h.Epochs[len(h.Epochs)-1].Epoch }

// EpochOf returns the epoch whose segments hold seq.
func (h *Head) EpochOf(seq uint64) uint64 {
	e := h.Epochs[0].Epoch
	for _, x := range h.Epochs {
		if x.First <= seq {
			e = x.Epoch
		}
	}
	return e
}

// DecodeHead decodes a HEAD (stored under key) exactly and checks it is
// consistent: format, floor ≤ seq+1, epochs rising from seq 1, a holder.
func DecodeHead(key string, b []byte) (*Head, error) {
	var h Head
	if err := strict(key, b, &h); err != nil {
		return nil, err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %w: %s", key, ErrCorrupt, fmt.Sprintf(format, args...))
	}
	switch {
	case h.Format != Format:
		return nil, fmt.Errorf("%s: HEAD format %d; this reynfs reads format %d", key, h.Format, Format)
	case h.Floor == 0 || h.Floor > h.Seq+1:
		return nil, bad("floor %d with seq %d", h.Floor, h.Seq)
	case len(h.Epochs) == 0 || h.Epochs[0].First != 1:
		return nil, bad("epochs must start at seq 1")
	case h.Holder.Store == "" || h.Holder.Host == "":
		return nil, bad("no holder")
	case h.Parent != nil && (h.Parent.WS == "" || h.Parent.Seq == 0):
		return nil, bad("parent %+v", *h.Parent)
	case h.Dropped != nil && (h.Dropped.Gens <= 0 || h.Dropped.Below > h.Seq+1):
		return nil, bad("dropped %+v", *h.Dropped)
	}
	for i, e := range h.Epochs {
		if e.Epoch == 0 || i > 0 && (e.Epoch <= h.Epochs[i-1].Epoch || e.First <= h.Epochs[i-1].First) {
			return nil, bad("epochs out of order at %d", i)
		}
	}
	return &h, nil
}

func canonical(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // not reached: plain structs
	}
	return append(b, '\n')
}

// strict decodes b into v and refuses unknown fields, trailing data and
// anything but the canonical encoding of what it decoded.
func strict(key string, b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%s: %w: %v", key, ErrCorrupt, err)
	}
	if !bytes.Equal(canonical(v), b) {
		return fmt.Errorf("%s: %w: not in canonical form", key, ErrCorrupt)
	}
	return nil
}

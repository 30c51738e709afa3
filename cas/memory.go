package cas

import (
	"fmt"
	"sync"
)

// Memory is an in-memory Store for tests of other packages. Like Badger it
// re-hashes on every Get (it has no cache), so Corrupt is detected. It is
// safe for concurrent use.
type Memory struct {
	mu      sync.RWMutex
	objects map[Hash][]byte
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory { return &Memory{objects: make(map[Hash][]byte)} }

// Get returns the object named h after checking that its bytes hash to h.
func (m *Memory) Get(h Hash) ([]byte, error) {
	m.mu.RLock()
	data, ok := m.objects[h]
	m.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("get %s: %w", h.Short(), ErrNotFound)
	}
	if Sum(data) != h {
		return nil, fmt.Errorf("get %s: %w", h, ErrCorrupt)
	}
	return data, nil
}

// Has reports whether the object is stored.
func (m *Memory) Has(h Hash) (bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	_, ok := m.objects[h]
	return ok, nil
}

// Put stores a copy of data unless the object is already stored.
func (m *Memory) Put(data []byte) (Hash, error) {
	h := Sum(data)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objects[h]; !ok {
		m.objects[h] = append(make([]byte, 0, len(data)), data...)
	}
	return h, nil
}

// Delete removes the objects (missing ones are ignored).
func (m *Memory) Delete(hashes []Hash) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, h := range hashes {
		delete(m.objects, h)
	}
	return nil
}

// Len returns the number of stored objects.
func (m *Memory) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.objects)
}

// Corrupt is a test hook: it damages the stored copy of h (flips a bit, or
// adds a byte to an empty object) so that the next Get returns ErrCorrupt.
// It does nothing if h is not stored.
func (m *Memory) Corrupt(h Hash) {
	m.mu.Lock()
	defer m.mu.Unlock()
	data, ok := m.objects[h]
	if !ok {
		return
	}
	bad := append([]byte(nil), data...) // a fresh slice: earlier Gets keep theirs
	if len(bad) == 0 {
		bad = []byte{0}
	} else {
		bad[len(bad)/2] ^= 0x01
	}
	m.objects[h] = bad
}

var _ FreshPutter = (*Memory)(nil)

// PutBatch stores copies of the blobs not already stored, after checking
// every pair (see BatchPutter).
func (m *Memory) PutBatch(blobs []Blob) error {
	if err := checkBlobs(blobs); err != nil {
		return err
	}
	return m.PutFresh(blobs)
}

// PutFresh stores copies of the blobs without checking them (see
// FreshPutter); one already stored keeps its bytes.
func (m *Memory) PutFresh(blobs []Blob) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, b := range blobs {
		if _, ok := m.objects[b.Hash]; !ok {
			m.objects[b.Hash] = append(make([]byte, 0, len(b.Data)), b.Data...)
		}
	}
	return nil
}

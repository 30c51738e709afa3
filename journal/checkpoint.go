package journal

import (
	"fmt"
	"sync"
	"time"
)

// The index checkpoint. Commits write Badger (the index) without syncing
// it, and Sync flushes only the log, so an fsync costs one device flush.
// What a power cut takes from Badger is rebuilt from the log on the next
// open (catch-up, see doc.go). The checkpoint bounds that work: it runs
// db.Sync every checkpointEvery, after checkpointBytes of log, and at
// Close. Nothing may rely on the index being durable (a compactor
// dropping a segment, say) before a checkpoint that started after the
// index write returned.
const (
	checkpointEvery = time.Second
	checkpointBytes = 64 << 20
)

type checkpointer struct {
	j    *Journal
	kick chan struct{}
	quit chan struct{}
	done chan struct{}

	mu   sync.Mutex
	at   int64 // log bytes the last checkpoint covers
	once sync.Once
	err  error
}

func (c *checkpointer) start(j *Journal) {
	c.j = j
	c.kick = make(chan struct{}, 1)
	c.quit = make(chan struct{})
	c.done = make(chan struct{})
	go c.loop()
}

// note is called after each commit: a checkpoint is due early when much
// log has gone by since the last one.
func (c *checkpointer) note() {
	if c.j == nil {
		return
	}
	c.mu.Lock()
	due := c.j.objs.LogBytes()-c.at >= checkpointBytes
	c.mu.Unlock()
	if due {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
}

func (c *checkpointer) loop() {
	defer close(c.done)
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-c.kick:
		case <-c.quit:
			return
		}
		if err := c.run(); err != nil {
			c.j.log.Error().Err(err).Msg("index checkpoint failed")
		}
	}
}

// run syncs Badger if the log moved since the last checkpoint.
func (c *checkpointer) run() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.j.objs.LogBytes()
	if n == c.at {
		return nil
	}
	c.j.closeMu.RLock()
	defer c.j.closeMu.RUnlock()
	if c.j.closed {
		return ErrClosed
	}
	c.j.stats.checkpoints.Add(1)
	// The log first: a durable index must never claim frames ("m/logpos"
	// past them) that a power cut can still take from the log, or the
	// next open would find the log shorter than the index and call that
	// damage.
	if err := c.j.objs.SyncLogBackground(); err != nil {
		return fmt.Errorf("index checkpoint: %w", err)
	}
	if err := c.j.db.Sync(); err != nil {
		return fmt.Errorf("index checkpoint: %w", err)
	}
	c.at = n
	return nil
}

// stop ends the loop and runs the last checkpoint (before Close closes
// Badger, which also syncs it, so a failure is reported).
func (c *checkpointer) stop() error {
	if c.j == nil {
		return nil
	}
	c.once.Do(func() {
		close(c.quit)
		<-c.done
		c.err = c.run()
	})
	return c.err
}

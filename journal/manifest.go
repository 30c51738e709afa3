package journal

import (
	"sync"

	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/rs/zerolog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Manifest is the store's own record of how far it had synced, kept in a
// small file beside the Badger directory (ManifestPath) so that it
// survives whatever happens to Badger's files. Open compares it with what
// Badger holds: a journal that ends before Durable lost acknowledged
// history, which a torn tail (records committed after the last sync and
// lost with a power cut) never does.
type Manifest struct {
	Format  int    // store format version
	ID      string // random store id, also kept in Badger ("m/id")
	Durable uint64 // every seq up to this one was synced
	Gen     uint64 // seq of the newest synced generation record (0: none)
}

const manifestMagic = "reynfs-store-manifest"

// manifestInterval spaces manifest writes whose only news is a higher
// durable seq.
const manifestInterval = 100 * time.Millisecond

// keyID holds the store id in Badger, so that a manifest is only ever
// compared with the store it was written for.
var keyID = []byte("m/id")

// ManifestPath is the manifest of the Badger store in dir: a sibling file
// (dir + ".manifest"), outside Badger's directory so that losing that
// directory does not lose the record of what it held.
func ManifestPath(dir string) string {
	return filepath.Clean(dir) + ".manifest"
}

func newStoreID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("store id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

func (m *Manifest) encode() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %d\n", manifestMagic, m.Format)
	fmt.Fprintf(&b, "id %s\n", m.ID)
	fmt.Fprintf(&b, "durable-seq %d\n", m.Durable)
	fmt.Fprintf(&b, "generation-seq %d\n", m.Gen)
	return b.Bytes()
}

func parseManifest(data []byte) (*Manifest, error) {
	m := &Manifest{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	seen := map[string]bool{}
	for n := 0; sc.Scan(); n++ {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			return nil, fmt.Errorf("%w: manifest line %d %q is not \"key value\"", ErrCorrupt, n+1, sc.Text())
		}
		if n == 0 && k != manifestMagic {
			return nil, fmt.Errorf("%w: manifest does not start with %q", ErrCorrupt, manifestMagic)
		}
		seen[k] = true
		var err error
		switch k {
		case manifestMagic:
			m.Format, err = strconv.Atoi(v)
		case "id":
			m.ID = v
		case "durable-seq":
			m.Durable, err = strconv.ParseUint(v, 10, 64)
		case "generation-seq":
			m.Gen, err = strconv.ParseUint(v, 10, 64)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: manifest %s %q: %v", ErrCorrupt, k, v, err)
		}
	}
	for _, k := range []string{manifestMagic, "id", "durable-seq", "generation-seq"} {
		if !seen[k] {
			return nil, fmt.Errorf("%w: manifest has no %s line", ErrCorrupt, k)
		}
	}
	if m.ID == "" || m.Gen > m.Durable {
		return nil, fmt.Errorf("%w: manifest id %q, generation seq %d past durable seq %d", ErrCorrupt, m.ID, m.Gen, m.Durable)
	}
	return m, nil
}

// readManifest reads the manifest at path without following a symlink;
// nil, nil when there is none.
func readManifest(path string) (*Manifest, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	defer f.Close()
	data := make([]byte, 4096)
	n, err := f.Read(data)
	if err != nil && n == 0 {
		return nil, fmt.Errorf("read manifest %s: %w: %v", path, ErrCorrupt, err)
	}
	m, err := parseManifest(data[:n])
	if err != nil {
		return nil, fmt.Errorf("read manifest %s: %w", path, err)
	}
	return m, nil
}

// writeManifest replaces the manifest crash-safely: a new file created
// O_EXCL beside it, written and fsynced, renamed over the old one, and the
// directory fsynced. A crash leaves the old manifest or the new one, and
// at worst a stray temp file that the next write removes.
func writeManifest(path string, m *Manifest) error {
	tmp := path + ".tmp"
	_ = os.Remove(tmp) // a crash's leftover; O_EXCL below refuses anything planted after
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	_, err = f.Write(m.encode())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write manifest: %w", err)
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("write manifest: sync dir: %w", err)
	}
	return nil
}

// Damage lists what a read-only open with Options.Damaged found wrong
// (empty for a sound store).
func (j *Journal) Damage() []string { return j.damage }

// ReadOnly reports whether the journal was opened read-only.
func (j *Journal) ReadOnly() bool { return j.readOnly }

// HadHistory reports whether the store's manifest says records were ever
// synced: a store with history and an empty journal lost it, and must not
// be treated as new (Open already refuses it; callers that would import
// into an empty store check again).
func (j *Journal) HadHistory() bool {
	if j.marks == nil {
		return false
	}
	j.marks.mu.Lock()
	defer j.marks.mu.Unlock()
	return j.marks.want.Durable > 0
}

// marks keeps the manifest's durable marks up to date. Sync reports each
// seq it made durable (durable); a goroutine of its own rewrites the
// manifest with the newest marks, so a sync never waits for the
// manifest's own three fsyncs, which would otherwise compete with every
// FUSE fsync (BenchmarkAppendSync: 177 µs per synced append without the
// manifest, 499 µs with a write per sync). A new generation is written at
// once; a durable seq that moved alone at most every manifestInterval.
// The manifest so lags the store by at most that interval and one write,
// and never claims more than a completed sync made durable.
type marks struct {
	path string
	log  zerolog.Logger

	mu     sync.Mutex
	cond   *sync.Cond
	gens   []uint64  // generation seqs enqueued, not yet synced
	want   Manifest  // what the manifest should say
	have   Manifest  // what it says
	failed Manifest  // the last write that failed (not retried until marks move)
	last   time.Time // when the last write started
	timer  bool      // a wake-up at the end of the interval is pending
	stop   bool
	done   chan struct{}
}

func newMarks(path string, m Manifest, log zerolog.Logger) *marks {
	k := &marks{path: path, log: log, want: m, have: m, done: make(chan struct{})}
	k.cond = sync.NewCond(&k.mu)
	go k.loop()
	return k
}

// noteGeneration remembers a generation record's seq until a sync makes
// it durable.
func (k *marks) noteGeneration(seq uint64) {
	k.mu.Lock()
	k.gens = append(k.gens, seq)
	k.mu.Unlock()
}

// durable records that every seq up to seq is synced. When that makes a
// new generation durable, it returns once the manifest says so: a
// checkpoint or rewind is acknowledged only after its marks are recorded.
func (k *marks) durable(seq uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	gen := k.want.Gen
	n := 0
	for ; n < len(k.gens) && k.gens[n] <= seq; n++ {
		gen = max(gen, k.gens[n])
	}
	k.gens = k.gens[n:]
	k.want.Durable = max(k.want.Durable, seq)
	if gen == k.want.Gen {
		k.cond.Broadcast()
		return
	}
	k.want.Gen = gen
	k.cond.Broadcast()
	for k.have.Gen < gen && k.failed.Gen < gen && !k.stop {
		k.cond.Wait()
	}
}

func (k *marks) loop() {
	defer close(k.done)
	k.mu.Lock()
	defer k.mu.Unlock()
	for {
		for (k.want == k.have || k.want == k.failed) && !k.stop {
			k.cond.Wait()
		}
		if k.want == k.have || k.want == k.failed {
			return // stopping, nothing (more) to write
		}
		if d := manifestInterval - time.Since(k.last); d > 0 && k.want.Gen == k.have.Gen && !k.stop {
			// Only the durable seq moved: wait out the interval (a new
			// generation or close writes at once).
			if !k.timer {
				k.timer = true
				time.AfterFunc(d, func() {
					k.mu.Lock()
					k.timer = false
					k.cond.Broadcast()
					k.mu.Unlock()
				})
			}
			k.cond.Wait()
			continue
		}
		w := k.want
		k.last = time.Now()
		k.mu.Unlock()
		err := writeManifest(k.path, &w)
		k.mu.Lock()
		if err != nil {
			// A manifest that lags only claims less than the store
			// holds, which open accepts.
			k.log.Error().Err(err).Uint64("seq", w.Durable).Msg("store manifest not updated")
			k.failed = w
			k.cond.Broadcast()
			continue
		}
		k.have = w
		k.cond.Broadcast() // durable may wait for a generation's marks
	}
}

// close writes the last marks and stops the writer.
func (k *marks) close() {
	k.mu.Lock()
	k.stop = true
	k.cond.Broadcast()
	k.mu.Unlock()
	<-k.done
}

package journal

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
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

// The manifest file holds two slots, A at offset 0 and B at slotSize, each
// a whole marks record with a slot sequence number and a CRC-32C. A write
// goes in place into the slot that does not hold the newest valid marks,
// followed by one fdatasync; open takes the valid slot with the higher
// sequence number. A write torn by a power cut fails its checksum and the
// other slot, never written meanwhile, still holds the previous marks,
// which only claim less than the store holds. This replaced a temp file,
// fsync, rename and fsync of the directory per write (three syncs, 0.8 to
// 4.5 ms on the checkpoint's path; one fdatasync is 0.3 to 1 ms here).
// The slots sit in separate 4 KiB blocks, so a write never rewrites the
// block of the slot it leaves alone. The first format, one text record
// replaced by rename, is still read; the first write replaces it by a
// slot file (writeManifest), crash-safely.
const (
	slotMagic = "reynfs-store-manifest-slot"
	slotSize  = 4096
)

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

// encode is the first format's text (still written by tests that make an
// old store).
func (m *Manifest) encode() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %d\n", manifestMagic, m.Format)
	m.encodeMarks(&b)
	return b.Bytes()
}

func (m *Manifest) encodeMarks(b *bytes.Buffer) {
	fmt.Fprintf(b, "id %s\n", m.ID)
	fmt.Fprintf(b, "durable-seq %d\n", m.Durable)
	fmt.Fprintf(b, "generation-seq %d\n", m.Gen)
}

// encodeSlot is one slot: the marks, its sequence number and a checksum
// of all that, zero-padded to slotSize.
func encodeSlot(m *Manifest, seq uint64) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %d\n", slotMagic, m.Format)
	m.encodeMarks(&b)
	fmt.Fprintf(&b, "slot-seq %d\n", seq)
	fmt.Fprintf(&b, "crc32c %08x\n", crc32.Checksum(b.Bytes(), castagnoli))
	out := make([]byte, slotSize)
	copy(out, b.Bytes())
	return out
}

func parseManifest(data []byte) (*Manifest, error) {
	m, _, err := parseFields(data, manifestMagic, false)
	return m, err
}

// parseFields parses "key value" lines that start with magic; with slot,
// it also wants and returns slot-seq.
func parseFields(data []byte, magic string, slot bool) (*Manifest, uint64, error) {
	m := &Manifest{}
	var seq uint64
	sc := bufio.NewScanner(bytes.NewReader(data))
	seen := map[string]bool{}
	for n := 0; sc.Scan(); n++ {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			return nil, 0, fmt.Errorf("%w: manifest line %d %q is not \"key value\"", ErrCorrupt, n+1, sc.Text())
		}
		if n == 0 && k != magic {
			return nil, 0, fmt.Errorf("%w: manifest does not start with %q", ErrCorrupt, magic)
		}
		seen[k] = true
		var err error
		switch k {
		case magic:
			m.Format, err = strconv.Atoi(v)
		case "id":
			m.ID = v
		case "durable-seq":
			m.Durable, err = strconv.ParseUint(v, 10, 64)
		case "generation-seq":
			m.Gen, err = strconv.ParseUint(v, 10, 64)
		case "slot-seq":
			seq, err = strconv.ParseUint(v, 10, 64)
		}
		if err != nil {
			return nil, 0, fmt.Errorf("%w: manifest %s %q: %v", ErrCorrupt, k, v, err)
		}
	}
	want := []string{magic, "id", "durable-seq", "generation-seq"}
	if slot {
		want = append(want, "slot-seq")
	}
	for _, k := range want {
		if !seen[k] {
			return nil, 0, fmt.Errorf("%w: manifest has no %s line", ErrCorrupt, k)
		}
	}
	if m.ID == "" || m.Gen > m.Durable {
		return nil, 0, fmt.Errorf("%w: manifest id %q, generation seq %d past durable seq %d", ErrCorrupt, m.ID, m.Gen, m.Durable)
	}
	return m, seq, nil
}

// parseSlot checks one slot's checksum and parses it.
func parseSlot(b []byte) (*Manifest, uint64, error) {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	if len(b) == 0 {
		return nil, 0, fmt.Errorf("%w: empty", ErrCorrupt)
	}
	i := bytes.LastIndex(b, []byte("\ncrc32c "))
	if i < 0 || !bytes.HasSuffix(b, []byte("\n")) {
		return nil, 0, fmt.Errorf("%w: no checksum line (torn?)", ErrCorrupt)
	}
	body := b[:i+1]
	sum, err := strconv.ParseUint(string(b[i+len("\ncrc32c "):len(b)-1]), 16, 32)
	if err != nil || uint32(sum) != crc32.Checksum(body, castagnoli) {
		return nil, 0, fmt.Errorf("%w: checksum mismatch (torn or damaged)", ErrCorrupt)
	}
	return parseFields(body, slotMagic, true)
}

// parseSlots returns the newer valid slot's marks, its index and sequence
// number; ErrCorrupt saying what is wrong with each when neither is valid.
func parseSlots(data []byte) (*Manifest, int, uint64, error) {
	var best *Manifest
	var bestSlot int
	var bestSeq uint64
	var why [2]string
	for i := range 2 {
		var b []byte
		if off := i * slotSize; off < len(data) {
			b = data[off:min(len(data), off+slotSize)]
		}
		m, seq, err := parseSlot(b)
		if err != nil {
			why[i] = strings.TrimPrefix(err.Error(), ErrCorrupt.Error()+": ")
			continue
		}
		if best == nil || seq > bestSeq {
			best, bestSlot, bestSeq = m, i, seq
		}
	}
	if best == nil {
		return nil, 0, 0, fmt.Errorf("%w: manifest has no valid slot (slot A: %s; slot B: %s)", ErrCorrupt, why[0], why[1])
	}
	return best, bestSlot, bestSeq, nil
}

// decodeManifest reads either format. slot is -1 for the first format.
func decodeManifest(data []byte) (m *Manifest, slot int, seq uint64, err error) {
	if bytes.HasPrefix(data, []byte(manifestMagic+" ")) {
		m, err = parseManifest(data)
		return m, -1, 0, err
	}
	return parseSlots(data)
}

// readManifest reads the manifest at path without following a symlink;
// nil, nil when there is none.
func readManifest(path string) (*Manifest, error) {
	m, _, _, err := readManifestFile(path)
	return m, err
}

func readManifestFile(path string) (*Manifest, int, uint64, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, 0, nil
	}
	if err != nil {
		return nil, 0, 0, fmt.Errorf("read manifest: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 2*slotSize))
	if err != nil {
		return nil, 0, 0, fmt.Errorf("read manifest %s: %w: %v", path, ErrCorrupt, err)
	}
	m, slot, seq, err := decodeManifest(data)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("read manifest %s: %w", path, err)
	}
	return m, slot, seq, nil
}

// writeManifest replaces the manifest crash-safely, in the slot format
// with m in slot A and slot B empty: a new file created O_EXCL beside it,
// written and fsynced, renamed over the old one, and the directory
// fsynced. A crash leaves the old manifest or the new one, and at worst a
// stray temp file that the next write removes. It makes a store's first
// manifest and upgrades the first format; later writes go in place
// (manifestFile).
func writeManifest(path string, m *Manifest) error {
	tmp := path + ".tmp"
	_ = os.Remove(tmp) // a crash's leftover; O_EXCL below refuses anything planted after
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	_, err = f.Write(append(encodeSlot(m, 1), make([]byte, slotSize)...))
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

// manifestFile writes the marks in place, into the slot that does not
// hold the newest valid ones, with one fdatasync: the file keeps its size
// and blocks, so the data is all there is to sync. Used by marks' writer
// goroutine only.
type manifestFile struct {
	path   string
	f      *os.File // nil until the first write
	newest int      // the slot with the newest valid marks
	seq    uint64   // its sequence number
}

func (w *manifestFile) write(m *Manifest) error {
	if w.f == nil {
		_, slot, seq, err := readManifestFile(w.path)
		if err != nil || slot < 0 || seq == 0 || w.open(slot, seq) != nil {
			// The first format, none, or not two whole slots (cut
			// short): replace it by a slot file holding m, which is
			// this write.
			if err := writeManifest(w.path, m); err != nil {
				return err
			}
			return w.open(0, 1)
		}
	}
	next := 1 - w.newest
	if _, err := w.f.WriteAt(encodeSlot(m, w.seq+1), int64(next)*slotSize); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	// A failed write or sync leaves newest as it was: the next write goes
	// into the same slot again, and the other one still holds marks a
	// completed sync made durable.
	if err := syscall.Fdatasync(int(w.f.Fd())); err != nil {
		return fmt.Errorf("write manifest: fdatasync: %w", err)
	}
	w.newest, w.seq = next, w.seq+1
	return nil
}

func (w *manifestFile) open(slot int, seq uint64) error {
	f, err := os.OpenFile(w.path, os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	if st, err := f.Stat(); err != nil || st.Size() != 2*slotSize || !st.Mode().IsRegular() {
		f.Close()
		return fmt.Errorf("write manifest: %s is not a %d-byte manifest file (%v)", w.path, 2*slotSize, err)
	}
	w.f, w.newest, w.seq = f, slot, seq
	return nil
}

func (w *manifestFile) close() {
	if w.f != nil {
		_ = w.f.Close()
		w.f = nil
	}
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
// manifest's own sync, which would otherwise compete with every FUSE
// fsync (BenchmarkAppendSync: 177 µs per synced append without the
// manifest, 499 µs with a rename-and-three-fsyncs write per sync). A new
// generation is written at once, and the Sync that made it durable waits
// for that write: a checkpoint is acknowledged only once the manifest
// says so. A durable seq that moved alone is written at most every
// manifestInterval. The manifest so lags the store by at most that
// interval and one write, and never claims more than a completed sync
// made durable: its write starts only after the sync returned, so the
// two cannot overlap (a manifest written during the sync could outlive a
// power cut that the synced data did not, and open would then refuse a
// sound store as having lost history).
type marks struct {
	file manifestFile // the writer goroutine's alone
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
	wakes  int // times the writer woke (tests)
	done   chan struct{}
}

func newMarks(path string, m Manifest, log zerolog.Logger) *marks {
	k := &marks{file: manifestFile{path: path}, log: log, want: m, have: m, done: make(chan struct{})}
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
		// Only the durable seq moved. While a wake-up at the end of the
		// interval is pending, the writer has nothing to do before it:
		// leave it asleep. Waking it on every sync was a goroutine
		// hand-off per fsync (futex wake, a thread to run it, its wait)
		// on fio's write+fsync, for a write once per manifestInterval.
		if !k.timer {
			k.cond.Broadcast()
		}
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
	defer k.file.close()
	k.mu.Lock()
	defer k.mu.Unlock()
	for {
		for (k.want == k.have || k.want == k.failed) && !k.stop {
			k.cond.Wait()
			k.wakes++
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
			k.wakes++
			continue
		}
		w := k.want
		k.last = time.Now()
		k.mu.Unlock()
		err := k.file.write(&w)
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

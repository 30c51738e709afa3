package journal

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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
func (j *Journal) HadHistory() bool { return j.manifest.Durable > 0 }

// noteGeneration remembers a generation record's seq until a sync makes
// it durable (called with j.mu held).
func (j *Journal) noteGenerationLocked(seq uint64) {
	if j.manifestPath != "" {
		j.gens = append(j.gens, seq)
	}
}

// markDurable records in the manifest that every seq up to seq is synced.
// A failure is logged, not returned: a manifest that lags only claims
// less than the store holds, which open accepts.
func (j *Journal) markDurable(seq uint64) {
	if j.manifestPath == "" {
		return
	}
	j.mu.Lock()
	gen := uint64(0)
	k := 0
	for ; k < len(j.gens) && j.gens[k] <= seq; k++ {
		gen = j.gens[k]
	}
	j.gens = j.gens[k:]
	j.mu.Unlock()

	j.manMu.Lock()
	defer j.manMu.Unlock()
	if seq <= j.manifest.Durable && gen <= j.manifest.Gen {
		return
	}
	m := j.manifest
	m.Durable = max(m.Durable, seq)
	m.Gen = max(m.Gen, gen)
	if err := writeManifest(j.manifestPath, &m); err != nil {
		j.log.Error().Err(err).Uint64("seq", seq).Msg("store manifest not updated")
		return
	}
	j.manifest = m
}

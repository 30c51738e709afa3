package replica

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/reynfs/reynfs/cas/objstore"
	"github.com/reynfs/reynfs/cas/objstore/objstorefake"
	"github.com/reynfs/reynfs/journal"
	"github.com/reynfs/reynfs/rewind"
)

// fsckRemote pushes two workspaces (one with a rich history, in several
// segments and packs) into b and returns their names.
func fsckRemote(t *testing.T, b objstore.Backend) {
	t.Helper()
	ctx := context.Background()
	s := newSource(t)
	history(t, s)
	if _, err := PushWith(ctx, s.j, b, "w", Options{PackSize: 40000, SegmentSize: 600}); err != nil {
		t.Fatal(err)
	}
	s2 := newSource(t)
	s2.write(t, "other.txt", pattern(9, 90000))
	s2.cut(t, "other")
	if _, err := Push(ctx, s2.j, b, "w2"); err != nil {
		t.Fatal(err)
	}
}

// damager changes the object under key: mutate returns the new bytes,
// or nil to delete it.
type damager func(t *testing.T, key string, mutate func([]byte) []byte)

func dirDamager(root string) damager {
	return func(t *testing.T, key string, mutate func([]byte) []byte) {
		t.Helper()
		path := filepath.Join(root, filepath.FromSlash(key))
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if data = mutate(data); data == nil {
			err = os.Remove(path)
		} else {
			err = os.WriteFile(path, data, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func backendDamager(b objstore.Backend) damager {
	return func(t *testing.T, key string, mutate func([]byte) []byte) {
		t.Helper()
		ctx := context.Background()
		data, _, err := b.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if data = mutate(data); data == nil {
			err = b.Delete(ctx, key)
		} else {
			err = b.Put(ctx, key, data)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func flip(b []byte) []byte { b[len(b)/2] ^= 0x10; return b }

// victim returns a key of b ending in suffix; for packs, one of kind.
func victim(t *testing.T, b objstore.Backend, prefix, suffix string, kind byte) string {
	t.Helper()
	ctx := context.Background()
	var found string
	err := b.List(ctx, prefix, func(i objstore.Info) error {
		if found != "" || !strings.HasSuffix(i.Key, suffix) {
			return nil
		}
		if kind != 0 {
			id := strings.TrimSuffix(strings.TrimPrefix(i.Key, "packs/"), suffix)
			data, _, err := b.Get(ctx, IndexKey(id))
			if err != nil {
				return err
			}
			x, err := DecodeIndex(IndexKey(id), data)
			if err != nil || x.Kind != kind {
				return err
			}
		}
		found = i.Key
		return nil
	})
	if err != nil || found == "" {
		t.Fatalf("no %s…%s of kind %q: %v", prefix, suffix, kind, err)
	}
	return found
}

// TestFsckRemote: a clean remote passes with its counts; each kind of
// damage, made in the real files of file:// and through the fake, is
// reported on a line naming the damaged key.
func TestFsckRemote(t *testing.T) {
	ctx := context.Background()
	type setup struct {
		b      objstore.Backend
		damage damager
	}
	kinds := map[string]func(t *testing.T) setup{
		"dir": func(t *testing.T) setup {
			root := t.TempDir()
			b, err := objstore.OpenDir(root)
			if err != nil {
				t.Fatal(err)
			}
			return setup{b, dirDamager(root)}
		},
		"fake": func(t *testing.T) setup {
			b := objstorefake.New(t.Name())
			return setup{b, backendDamager(b)}
		},
	}
	cases := []struct {
		name   string
		damage func(t *testing.T, s setup) string // returns the key to be named
	}{
		{"clean", func(t *testing.T, s setup) string { return "" }},
		{"flip-data-pack", func(t *testing.T, s setup) string {
			k := victim(t, s.b, "packs/", ".pack", KindData)
			s.damage(t, k, flip)
			return k
		}},
		{"flip-tree-pack", func(t *testing.T, s setup) string {
			k := victim(t, s.b, "packs/", ".pack", KindTree)
			s.damage(t, k, flip)
			return k
		}},
		{"flip-segment", func(t *testing.T, s setup) string {
			k := victim(t, s.b, "ws/w/seg/", ".seg", 0)
			s.damage(t, k, flip)
			return k
		}},
		{"delete-index", func(t *testing.T, s setup) string {
			k := victim(t, s.b, "packs/", ".idx", 0)
			s.damage(t, k, func([]byte) []byte { return nil })
			return k
		}},
		{"delete-pack", func(t *testing.T, s setup) string {
			k := victim(t, s.b, "packs/", ".pack", 0)
			s.damage(t, k, func([]byte) []byte { return nil })
			return k
		}},
		{"truncate-head", func(t *testing.T, s setup) string {
			k := HeadKey("w2")
			s.damage(t, k, func(b []byte) []byte { return b[:len(b)/2] })
			return k
		}},
	}
	for kind, mk := range kinds {
		for _, c := range cases {
			t.Run(kind+"/"+c.name, func(t *testing.T) {
				s := mk(t)
				fsckRemote(t, s.b)
				key := c.damage(t, s)
				rep, err := Fsck(ctx, s.b, "")
				if err != nil {
					t.Fatal(err)
				}
				if key == "" {
					if rep.Damaged() || rep.Workspaces != 2 || rep.Segments < 3 || rep.Packs < 3 || rep.Objects == 0 || rep.Records == 0 {
						t.Fatalf("clean remote: %+v", rep)
					}
					return
				}
				named := false
				for _, p := range rep.Problems {
					if strings.Contains(p, "\n") {
						t.Errorf("problem on more than one line: %q", p)
					}
					named = named || strings.HasPrefix(p, key+":")
				}
				if !named {
					t.Fatalf("damage to %s not reported by a line naming it: %q", key, rep.Problems)
				}
			})
		}
	}
}

// TestFsckRemoteOneWorkspace: --ws checks that workspace only (a damaged
// segment of another is not read), and every pack is fetched once.
func TestFsckRemoteOneWorkspace(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	b, err := objstore.OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	fsckRemote(t, b)
	k := victim(t, b, "ws/w/seg/", ".seg", 0)
	dirDamager(root)(t, k, flip)
	rec := &recorder{Backend: b}
	rep, err := Fsck(ctx, rec, "w2")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Damaged() || rep.Workspaces != 1 || rep.Packs == 0 {
		t.Fatalf("fsck of w2 with w damaged: %+v", rep)
	}
	rec = &recorder{Backend: b}
	rep, err = Fsck(ctx, rec, "")
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Damaged() {
		t.Fatalf("fsck of every workspace missed %s", k)
	}
	got := map[string]int{}
	for _, r := range rec.requests() {
		if r.op != "get" || !strings.HasSuffix(r.key, ".pack") {
			continue
		}
		if got[r.key]++; got[r.key] > 1 {
			t.Errorf("%s fetched %d times", r.key, got[r.key])
		}
	}
	if len(got) != rep.Packs {
		t.Errorf("%d packs fetched, report says %d", len(got), rep.Packs)
	}
}

// TestFsckRemoteS3: the same check on a real S3 server: clean, then a
// pack replaced by damaged bytes.
func TestFsckRemoteS3(t *testing.T) {
	b := backends(t)["s3"](t)
	fsckRemote(t, b)
	ctx := context.Background()
	rep, err := Fsck(ctx, b, "")
	if err != nil || rep.Damaged() || rep.Workspaces != 2 {
		t.Fatalf("clean remote: %+v, %v", rep, err)
	}
	k := victim(t, b, "packs/", ".pack", KindData)
	backendDamager(b)(t, k, flip)
	rep, err = Fsck(ctx, b, "")
	if err != nil || len(rep.Problems) == 0 || !strings.HasPrefix(rep.Problems[0], k+":") {
		t.Fatalf("damaged %s: %+v, %v", k, rep, err)
	}
}

// TestFsckRemoteWalksTrees: a workspace whose file data is reached only
// through an import's tree: with --ws, fsck finds the data pack by
// walking the tree (a flipped byte in it is reported) and names an
// object whose index is gone as reached from the import's record.
func TestFsckRemoteWalksTrees(t *testing.T) {
	ctx := context.Background()
	for _, damage := range []string{".pack", ".idx"} {
		t.Run(damage, func(t *testing.T) {
			root := t.TempDir()
			b, err := objstore.OpenDir(root)
			if err != nil {
				t.Fatal(err)
			}
			src := t.TempDir()
			if err := os.MkdirAll(filepath.Join(src, "d"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(src, "d", "f.bin"), pattern(4, 200000), 0o644); err != nil {
				t.Fatal(err)
			}
			j, err := journal.Open(filepath.Join(t.TempDir(), "db"), journal.Options{Logger: zerolog.Nop()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = j.Close() })
			next := uint64(2)
			im := &rewind.Importer{Store: j.Objects(), Alloc: func() (uint64, error) { next++; return next - 1, nil }}
			tr, err := im.Import(src)
			if err != nil {
				t.Fatal(err)
			}
			r, blobs, err := tr.Root()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := rewind.CommitImport(j, r, blobs, next, "import"); err != nil {
				t.Fatal(err)
			}
			if _, err := Push(ctx, j, b, "imp"); err != nil {
				t.Fatal(err)
			}
			if rep, err := Fsck(ctx, b, "imp"); err != nil || rep.Damaged() || rep.Packs != 2 {
				t.Fatalf("clean: %+v, %v", rep, err)
			}
			pack := victim(t, b, "packs/", ".pack", KindData)
			key := pack
			if damage == ".idx" {
				key = strings.TrimSuffix(pack, ".pack") + ".idx"
				dirDamager(root)(t, key, func([]byte) []byte { return nil })
			} else {
				dirDamager(root)(t, key, flip)
			}
			rep, err := Fsck(ctx, b, "imp")
			if err != nil {
				t.Fatal(err)
			}
			want := key + ":"
			if damage == ".idx" {
				want = "ws/imp/seg/" // the object named from the import's record
			}
			found := false
			for _, p := range rep.Problems {
				found = found || strings.HasPrefix(p, want) && (damage == ".pack" || strings.Contains(p, "is in no pack index"))
			}
			if !found {
				t.Fatalf("%s damaged: problems %q; want one starting %q", key, rep.Problems, want)
			}
		})
	}
}

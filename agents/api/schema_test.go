package api

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/api.schema.json from the Go types")

// TestSchemaGolden: the checked-in schema is what the Go types say, so
// neither can change without the other (within a major version, only by
// adding). Regenerate with: go test ./agents/api -run TestSchemaGolden -update
func TestSchemaGolden(t *testing.T) {
	got, err := Schema()
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("..", "..", "docs", "api.schema.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (generate it with -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("docs/api.schema.json differs from the Go types' schema; if the change is intended (add-only within major %d), run go test ./agents/api -run TestSchemaGolden -update", Major)
	}
	for _, m := range methods {
		if !bytes.Contains(got, []byte(`"`+m.params.Method()+`.params"`)) {
			t.Errorf("schema has no %s.params", m.params.Method())
		}
	}
}

package spec

import (
	"os"
	"strings"
	"testing"
)

// TestVectorsIndexListsEveryFile: spec/vectors/README.md, the index an
// implementer reads to learn what each vector file holds and how to
// read it, names every JSON file of the folder, and only those.
func TestVectorsIndexListsEveryFile(t *testing.T) {
	readme, err := os.ReadFile("vectors/README.md")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir("vectors")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]bool{}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") {
			files[e.Name()] = true
			if !strings.Contains(string(readme), "| `"+e.Name()+"` |") {
				t.Errorf("vectors/README.md has no row for %s", e.Name())
			}
		}
	}
	for _, line := range strings.Split(string(readme), "\n") {
		if name, ok := strings.CutPrefix(line, "| `"); ok {
			name, _, _ = strings.Cut(name, "`")
			if strings.HasSuffix(name, ".json") && !files[name] {
				t.Errorf("vectors/README.md lists %s, which is not in the folder", name)
			}
		}
	}
}

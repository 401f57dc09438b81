package secondimpl2

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var delimRow = regexp.MustCompile(`^\|(\s*:?-+:?\s*\|)+\s*$`)

// Every markdown table of the spec is one block: a header, its delimiter
// row, then rows. A row cut off from its table by a paragraph renders as
// text (attestation.md §6 lost its step 13 so, before document 1.7.1).
func TestSpecTablesContiguous(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "spec", "*.md"))
	if len(files) == 0 {
		t.Fatal("no spec files")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		fence := false
		for i := 0; i < len(lines); i++ {
			if strings.HasPrefix(lines[i], "```") {
				fence = !fence
			}
			if fence || !strings.HasPrefix(lines[i], "|") {
				continue
			}
			start := i
			for i < len(lines) && strings.HasPrefix(lines[i], "|") {
				i++
			}
			if i-start < 2 || !delimRow.MatchString(lines[start+1]) {
				t.Errorf("%s:%d: table rows without a header and delimiter row: %q", filepath.Base(f), start+1, lines[start])
			}
		}
	}
}

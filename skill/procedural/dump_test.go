package procedural

import (
	"encoding/json"
	"os"
	"strconv"
	"testing"
)

// TestDump prints one set when PROCEDURAL_DUMP=<seed> is set (manual review).
func TestDump(t *testing.T) {
	s := os.Getenv("PROCEDURAL_DUMP")
	if s == "" {
		t.Skip("set PROCEDURAL_DUMP=<seed> to print a set")
	}
	seed, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{}
	if d := os.Getenv("PROCEDURAL_DOMAIN"); d != "" {
		cfg.Domains = []string{d}
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	set, err := g.Generate(seed)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range set.Parts {
		t.Logf("===== PART %d =====\n%s\n", i+1, p.Narrative)
		for _, q := range p.Questions {
			b, _ := json.Marshal(q)
			t.Logf("%s", b)
		}
	}
}

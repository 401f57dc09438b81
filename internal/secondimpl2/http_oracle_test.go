package secondimpl2

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The oracle knows the answers of the sets in spec/examples (the data the
// node's embedded `examples` source serves) and nothing else.

type oracleHit struct {
	set    *specSet
	answer string
}

func loadOracle(t *testing.T) map[string]oracleHit {
	t.Helper()
	root := filepath.Join("..", "..", "spec", "examples")
	out := map[string]oracleHit{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var s specSet
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		for _, pt := range s.Parts {
			for _, q := range pt.Questions {
				out[pt.Narrative+"\x00"+q.Question] = oracleHit{set: &s, answer: q.Answer}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("loading spec/examples: %v", err)
	}
	if len(out) == 0 {
		t.Fatal("no questions in spec/examples")
	}
	return out
}

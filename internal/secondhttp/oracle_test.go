package secondhttp

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The oracle knows the answers of the sets in spec/examples (the data the
// node's embedded `examples` source serves) and nothing else.

type exSet struct {
	Domain string `json:"domain"`
	Kind   string `json:"kind"`
	Parts  []struct {
		Narrative string `json:"narrative"`
		Questions []struct {
			Question string `json:"question"`
			Answer   string `json:"answer"`
		} `json:"questions"`
	} `json:"parts"`
}

type oracleHit struct {
	set    *exSet
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
		var s exSet
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

func frame8(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

// contentID is attestation.md §3.3 for a narrative set.
func contentID(s *exSet) string {
	var in []byte
	if s.Kind != "" && s.Kind != "narrative" {
		in = append(in, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
		in = frame8(in, s.Kind)
	}
	in = frame8(in, s.Domain)
	for _, p := range s.Parts {
		in = frame8(in, p.Narrative)
		for _, q := range p.Questions {
			in = frame8(in, q.Question)
			in = frame8(in, q.Answer)
		}
	}
	h := sha256.Sum256(in)
	return hex.EncodeToString(h[:16])
}

type tRound struct {
	narrative, question, answer string
}

// transcriptDigest is attestation.md §4 (narrative kind), answers cut to 64
// bytes on a character boundary.
func transcriptDigest(rounds []tRound) []byte {
	b := []byte("acaptcha/transcript/v1")
	for i, r := range rounds {
		b = binary.BigEndian.AppendUint32(b, uint32(i+1))
		a := r.answer
		if len(a) > 64 {
			n := 64
			for n > 0 && a[n]&0xC0 == 0x80 {
				n--
			}
			a = a[:n]
		}
		for _, s := range []string{r.narrative, r.question, a} {
			b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
			b = append(b, s...)
		}
	}
	h := sha256.Sum256(b)
	return h[:]
}

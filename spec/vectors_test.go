package spec

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/skill"
)

func decodeVector(t *testing.T, name string, v any) {
	t.Helper()
	data, err := os.ReadFile("vectors/" + name)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// TestDerivedTauVectors: token counts, the human lower bound and derived
// budgets are exactly as spec/vectors/derived_tau.json says.
func TestDerivedTauVectors(t *testing.T) {
	var v struct {
		Description      string  `json:"description"`
		AnswerTokens     float64 `json:"answer_tokens"`
		MaxHumanFraction float64 `json:"max_human_fraction"`
		TokenCases       []struct {
			Name   string `json:"name"`
			Text   string `json:"text"`
			Words  int    `json:"words"`
			Tokens int    `json:"tokens"`
		} `json:"token_cases"`
		BudgetCases []struct {
			NarrativeTokens int     `json:"narrative_tokens"`
			Alpha           float64 `json:"alpha"`
			LowerBoundNs    int64   `json:"lower_bound_ns"`
			BudgetMs        int64   `json:"budget_ms"`
			Allowed         bool    `json:"allowed"`
		} `json:"budget_cases"`
	}
	decodeVector(t, "derived_tau.json", &v)
	if len(v.TokenCases) < 5 || len(v.BudgetCases) < 10 {
		t.Fatalf("%d token cases, %d budget cases", len(v.TokenCases), len(v.BudgetCases))
	}
	p := skill.DefaultPolicy()
	if p.Human.AnswerTokens != v.AnswerTokens || p.MaxHumanFraction != v.MaxHumanFraction {
		t.Fatalf("default model: A=%v fraction=%v, vector A=%v fraction=%v", p.Human.AnswerTokens, p.MaxHumanFraction, v.AnswerTokens, v.MaxHumanFraction)
	}
	for _, c := range v.TokenCases {
		if c.Tokens != (4*c.Words+1)/3 {
			t.Errorf("%s: %d tokens for %d words breaks the rule", c.Name, c.Tokens, c.Words)
		}
		if got := skill.CountTokens(c.Text); got != c.Tokens {
			t.Errorf("%s: CountTokens(%q) = %d, want %d", c.Name, c.Text, got, c.Tokens)
		}
	}
	allowed := 0
	for _, c := range v.BudgetCases {
		if got := p.Human.LowerBound(c.NarrativeTokens); got != time.Duration(c.LowerBoundNs) {
			t.Errorf("L=%d: lower bound %d ns, want %d", c.NarrativeTokens, got, c.LowerBoundNs)
		}
		dp := p
		dp.DeriveTau, dp.Alpha = true, c.Alpha
		b, err := dp.Budget(c.NarrativeTokens)
		if (err == nil) != c.Allowed {
			t.Errorf("L=%d alpha=%v: err %v, want allowed=%v", c.NarrativeTokens, c.Alpha, err, c.Allowed)
			continue
		}
		if err == nil {
			allowed++
			if b != time.Duration(c.BudgetMs)*time.Millisecond {
				t.Errorf("L=%d alpha=%v: budget %s, want %d ms", c.NarrativeTokens, c.Alpha, b, c.BudgetMs)
			}
		}
	}
	if allowed == 0 || allowed == len(v.BudgetCases) {
		t.Errorf("%d of %d budget cases allowed: the vector should show both", allowed, len(v.BudgetCases))
	}
}

// TestSetIDVector: skill.Set.ContentID hashes exactly the framed bytes the
// vector lists, and a set file's own id does not change it.
func TestSetIDVector(t *testing.T) {
	var v struct {
		Description    string          `json:"description"`
		Set            json.RawMessage `json:"set"`
		HashedInputHex string          `json:"hashed_input_hex"`
		SetID          string          `json:"set_id"`
		SetWithOwnID   json.RawMessage `json:"set_with_own_id"`
		SetIDWithOwnID string          `json:"set_id_with_own_id"`
	}
	decodeVector(t, "set_id.json", &v)
	set, err := skill.DecodeSet(v.Set)
	if err != nil {
		t.Fatal(err)
	}
	if got := set.ContentID(); got != v.SetID || set.ID != v.SetID {
		t.Fatalf("content ID %q (ID %q), want %q", got, set.ID, v.SetID)
	}
	in, err := hex.DecodeString(v.HashedInputHex)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(in)
	if hex.EncodeToString(sum[:16]) != v.SetID {
		t.Fatal("set_id is not the 16-byte SHA-256 prefix of the hashed input")
	}
	// The framing, rebuilt from the rule: 8-byte big-endian length, bytes.
	var framed []byte
	put := func(s string) { framed = append(binary.BigEndian.AppendUint64(framed, uint64(len(s))), s...) }
	put(set.Domain)
	for _, p := range set.Parts {
		put(p.Narrative)
		for _, q := range p.Questions {
			put(q.Question)
			put(q.Answer)
		}
	}
	if !bytes.Equal(framed, in) {
		t.Fatal("hashed input does not follow the framing rule")
	}
	own, err := skill.DecodeSet(v.SetWithOwnID)
	if err != nil {
		t.Fatal(err)
	}
	if own.ID == v.SetIDWithOwnID || own.ContentID() != v.SetIDWithOwnID {
		t.Fatalf("own ID %q, content ID %q, want content ID %q", own.ID, own.ContentID(), v.SetIDWithOwnID)
	}
}

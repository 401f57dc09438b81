package generate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/procedural"
)

// fuzzSkeletons are the skeletons FuzzHybridReply rewords: the hand-made
// fixture, a procedural skeleton of a fixed seed, and the LLM corpus's
// skeletons when it is present (it is outside the repository).
func fuzzSkeletons(f *testing.F) (sets []*skill.Set, replies [][2]any) {
	sets = append(sets, hybridFixture())
	g, err := procedural.New(procedural.Config{})
	if err != nil {
		f.Fatal(err)
	}
	s, err := g.Generate(7)
	if err != nil {
		f.Fatal(err)
	}
	sets = append(sets, s)
	dir := os.Getenv("ACAPTCHA_LLM_CORPUS")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "llm-corpus")
	}
	skels, _ := filepath.Glob(filepath.Join(dir, "hybrid", "*-skeleton.json"))
	for _, sk := range skels {
		data, err := os.ReadFile(sk)
		if err != nil {
			continue
		}
		var s skill.Set
		if json.Unmarshal(data, &s) != nil || len(s.Parts) == 0 {
			continue
		}
		nn := strings.TrimSuffix(sk, "-skeleton.json")
		for pi := range s.Parts {
			if b, err := os.ReadFile(fmt.Sprintf("%s-p%d.reply.txt", nn, pi+1)); err == nil {
				replies = append(replies, [2]any{len(sets), string(b)})
			}
		}
		sets = append(sets, &s)
	}
	return sets, replies
}

// FuzzHybridReply feeds a model's rewording replies (a part's narrative,
// then the questions) to the hybrid generator's decoders and checks, as
// Hybrid.attempt does, against a fixed skeleton. No panic, a bounded
// time on any reply up to MaxOutputBytes; a refused reply is
// ErrMalformed; an accepted narrative is non-empty, trimmed, at most
// MaxNarrativeBytes and has the skeleton part's paragraphs; an accepted
// question is one line of valid UTF-8 of at most MaxQuestionBytes that
// differs from the original.
func FuzzHybridReply(f *testing.F) {
	sets, replies := fuzzSkeletons(f)
	for i, s := range sets {
		for pi, p := range s.Parts {
			b, _ := json.Marshal(map[string]string{"narrative": p.Narrative})
			var qs []map[string]string
			for qi, q := range p.Questions {
				qs = append(qs, map[string]string{"id": fmt.Sprintf("%d.%d", pi+1, qi+1), "question": "In short: " + q.Question})
			}
			qb, _ := json.Marshal(map[string]any{"questions": qs})
			f.Add(uint8(i), uint8(pi), "```json\n"+string(b)+"\n```", string(qb))
		}
	}
	for _, r := range replies {
		f.Add(uint8(r[0].(int)), uint8(0), r[1].(string), `{"questions":[{"id":"1.1","question":"x"}]}`)
	}
	f.Add(uint8(0), uint8(0), `{"narrative":"AUDIT LOG\n\nCA2 held 4 of 4.\n\nKT-919; RX-390 faded."}`, `{"questions":[{"id":"1.1","question":"Above the 30% threshold, which enzyme held its drift at every single lab?"},{"id":"1.1","question":"y"}]}`)
	f.Add(uint8(0), uint8(2), `{"narrative":""}`, `{"questions":[{"id":" 9.9 ","question":null}]}`)
	f.Add(uint8(0), uint8(1), `{"narrative":"x"} {}`, "```\n{\"questions\":[]}\n```")
	// The inventories are built once: the checks only read them.
	invs := make([]*inventory, len(sets))
	for i, s := range sets {
		invs[i] = newInventory(s)
	}
	f.Fuzz(func(t *testing.T, set, part uint8, reply, qreply string) {
		s, inv := sets[int(set)%len(sets)], invs[int(set)%len(sets)]
		pi := int(part) % len(s.Parts)
		start := time.Now()
		narr, err := DecodeRewording(reply)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("rewording refused with %v, not ErrMalformed", err)
			}
		} else {
			if narr == "" || narr != strings.TrimSpace(narr) || len(narr) > skill.MaxNarrativeBytes {
				t.Fatalf("decoded narrative of %d bytes, untrimmed or empty", len(narr))
			}
			if reason, _ := inv.checkRewording(pi, narr, DefaultLengthDrift); reason == "" {
				if got, want := len(paragraphs(narr)), len(inv.paras[pi]); got != want {
					t.Fatalf("accepted a rewording of %d paragraphs from %d", got, want)
				}
			}
		}
		got, err := DecodeQuestionRewording(qreply)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("question rewording refused with %v, not ErrMalformed", err)
			}
		} else {
			if len(got) == 0 || len(got) > maxRewordedQuestions {
				t.Fatalf("%d questions decoded", len(got))
			}
			for pi, p := range s.Parts {
				for qi, q := range p.Questions {
					text, ok := got[fmt.Sprintf("%d.%d", pi+1, qi+1)]
					if !ok {
						continue
					}
					clean, why, _ := inv.checkQuestion(pi, qi, text)
					if why != "" {
						continue
					}
					if clean == "" || strings.ContainsAny(clean, "\r\n") || len(clean) > skill.MaxQuestionBytes || !utf8.ValidString(clean) {
						t.Fatalf("accepted question %q", clean)
					}
					if skill.Normalize(clean) == skill.Normalize(q.Question) {
						t.Fatalf("accepted an unchanged question %q", clean)
					}
				}
			}
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("checking a reply of %d+%d bytes took %s", len(reply), len(qreply), d)
		}
	})
}

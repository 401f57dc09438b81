package generate

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/procedural"
)

// hedgeForms join two candidates into one phrase the way a hedging
// script does without a joining word (which the judge refuses outright):
// the form whose second candidate stands as description words beside the
// first (M4), which stage 1b is about. Since verification.md 1.5.19 "x, y"
// is an explanation form: judged by its head x alone, it is accepted
// where x is and covers nothing more (a single guess), so it is left out
// here; the two-world test of internal/secondmatch2 covers it.
var hedgeForms = []string{"%s %s"}

// TestMeasureMissedDistractor (WORDED_MEASURE=1; WORDED_MEASURE_SETS
// procedural sets, default 100) measures what a hedging script gains when
// a question's distractor list misses one candidate, as a model's list
// may: on procedural sets (complete lists by construction), each
// distractor entry is dropped in turn, and a script that knows the
// question's candidates (the canonical answer and every distractor
// entry) but neither the right one nor the missing one sends a random
// pair of them as one phrase ("x y"; hedgeForms). It reports the scenarios in which the
// right answer plus the missing entry is accepted, the pair script's
// per-question and whole-session (one question per part) pass rates,
// with the list as the model left it ("before") and after stage 1b of
// generation.md (unlistWorded: a question with a worded variant is
// served without distractors). With the LLM corpus present it also runs
// the audit's case and the kept LLM questions given a list that misses
// their description-word candidates.
//
// Measured at generation.md 1.1.11 and verification.md 1.5.19, 40 procedural sets (seeds 1..40, 240
// questions with distractors, 187 with a worded variant): complete lists
// accept 0 of 20,881 candidate pairs; one entry missing (2,796
// scenarios), right answer + missing entry accepted in 389 scenarios (148
// questions) before stage 1b, 45 (26 questions, entity answers: another
// candidate's descriptive form, accepted only where the answer alone is)
// after; the random-pair script passes 0.0195 of questions before,
// 0.0042 after (a single random guess: 1/k). The audit's case is accepted
// with [mainshock] and [mainshock, aftershock] before, refused after.
func TestMeasureMissedDistractor(t *testing.T) {
	if os.Getenv("WORDED_MEASURE") == "" {
		t.Skip("set WORDED_MEASURE=1 to measure")
	}
	n := 100
	if v, err := strconv.Atoi(os.Getenv("WORDED_MEASURE_SETS")); err == nil && v > 0 {
		n = v
	}
	g, err := procedural.New(procedural.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var st hedgeStats
	for i := 1; i <= n; i++ {
		s, err := g.Generate(uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		st.set(s)
	}
	st.report(t, fmt.Sprintf("procedural (%d sets)", n))

	dir := llmCorpusDir()
	if dir == "" {
		t.Log("LLM corpus not present: corpus measurements skipped")
		return
	}
	// The audit's case: seismology, part 3, the role question.
	if s, err := skill.LoadFile(filepath.Join(dir, "sets", "04-seismology.json")); err == nil {
		q := s.Parts[2].Questions[2]
		shown := narrativesThrough(s, 2)
		for _, d := range [][]string{nil, {"mainshock"}, {"mainshock", "aftershock"}, {"mainshock", "aftershock", "unrelated"}} {
			q.Distractors = d
			before := skill.Judge(&q, "unrelated foreshock", shown)
			qa := q
			if _, ok := skill.WordedVariant(&qa, shown); ok || qa.AnswerType == skill.LabelAnswer {
				qa.Distractors = nil
			}
			after := skill.Judge(&qa, "unrelated foreshock", shown)
			t.Logf("audit %q distractors=%v: \"unrelated foreshock\" accepted before %v, after stage 1b %v", q.Answer, d, before, after)
		}
	}
	// Kept LLM questions given a list that names only a code (misses
	// every description-word candidate): hedges with each description
	// word of the shown texts.
	pol := skill.DefaultPolicy()
	vr, err := NewValidator(ValidatorConfig{Policy: &pol, WhiteBoxKind: skill.SourceCorpus})
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "sets", "*.json"))
	var qs, worded, expB, expA, wexpB, wexpA int
	for _, f := range files {
		s, err := skill.LoadFile(f)
		if err != nil {
			continue
		}
		rep := vr.Offline(context.Background(), s)
		if !rep.Accepted() {
			continue
		}
		for pi := range rep.Set.Parts {
			shown := narrativesThrough(rep.Set, pi)
			vocab := map[string]bool{}
			for _, n := range shown {
				maps.Copy(vocab, skill.DescriptionWords(n))
			}
			for qi := range rep.Set.Parts[pi].Questions {
				q := rep.Set.Parts[pi].Questions[qi]
				qs++
				q.Distractors = []string{"QX-0000"}
				_, isW := skill.WordedVariant(&q, shown)
				isW = isW || q.AnswerType == skill.LabelAnswer
				qa := q
				if isW {
					worded++
					qa.Distractors = nil
				}
				b, a := false, false
				for w := range vocab {
					if skill.FunctionWord(w) || skill.JoiningWord(w) {
						continue
					}
					h := q.Answer + " " + w
					if skill.Judge(&q, w, shown) || len(h) > skill.MaxAnswerBytes {
						continue
					}
					// Gain over the no-distractor mode only: a question
					// word or a narrative run is accepted there too.
					q0 := q
					q0.Distractors = nil
					if skill.Judge(&q0, h, shown) {
						continue
					}
					b = b || skill.Judge(&q, h, shown)
					a = a || skill.Judge(&qa, h, shown)
				}
				if b {
					expB++
					if isW {
						wexpB++
					}
				}
				if a {
					expA++
					if isW {
						wexpA++
					}
				}
			}
		}
	}
	t.Logf("LLM corpus, kept questions given a list missing their description-word candidates: %d questions, %d with a worded variant; "+
		"\"answer + description word\" accepted on %d (%d worded) before, %d (%d worded) after stage 1b "+
		"(on a question without a worded variant the hedge is accepted only where the answer alone is: the other candidate's world refuses it)",
		qs, worded, expB, wexpB, expA, wexpA)
}

// llmCorpusDir is the LLM corpus (corpusDir's folder), or "" when absent.
func llmCorpusDir() string {
	dir := os.Getenv("ACAPTCHA_LLM_CORPUS")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "llm-corpus")
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return ""
	}
	return dir
}

type hedgeStats struct {
	questions, listed, worded int
	scenarios                 int
	fullPairs, fullAccepted   int
	exposedB, exposedA        int // scenarios: right + missing accepted
	qExposedB, qExposedA      int // questions with an exposed scenario
	passB, passA              float64
	sessB, sessA              float64
	sessions                  int
}

// set measures every question of s; sessions draw one question per part.
func (st *hedgeStats) set(s *skill.Set) {
	sessB, sessA := 1.0, 1.0
	for pi := range s.Parts {
		shown := narrativesThrough(s, pi)
		var partB, partA float64
		nq := 0
		for qi := range s.Parts[pi].Questions {
			q := s.Parts[pi].Questions[qi]
			st.questions++
			nq++
			if len(q.Distractors) == 0 {
				continue
			}
			st.listed++
			_, isW := skill.WordedVariant(&q, shown)
			if isW {
				st.worded++
			}
			cands := append([]string{q.Answer}, q.Distractors...)
			for i := range cands {
				for j := i + 1; j < len(cands); j++ {
					st.fullPairs++
					if pairAccepted(&q, cands[i], cands[j], shown) {
						st.fullAccepted++
					}
				}
			}
			var qB, qA float64
			exB, exA := false, false
			for di := range q.Distractors {
				st.scenarios++
				qd := q
				qd.Distractors = slices.Delete(slices.Clone(q.Distractors), di, di+1)
				qa := qd
				if _, ok := skill.WordedVariant(&qa, shown); ok || qa.AnswerType == skill.LabelAnswer {
					qa.Distractors = nil
				}
				miss := q.Distractors[di]
				b, a := false, false
				for _, v := range q.Variants() {
					b = b || pairAccepted(&qd, v, miss, shown)
					a = a || pairAccepted(&qa, v, miss, shown)
				}
				if b {
					st.exposedB++
					exB = true
				}
				if a && os.Getenv("WORDED_MEASURE_VERBOSE") != "" {
					fmt.Printf("after: %s %q %v missing %q\n", q.AnswerType, q.Question, q.Variants(), miss)
				}
				if a {
					st.exposedA++
					exA = true
				}
				pb, pa, np := 0, 0, 0
				for i := range cands {
					for j := i + 1; j < len(cands); j++ {
						np++
						if pairAccepted(&qd, cands[i], cands[j], shown) {
							pb++
						}
						if pairAccepted(&qa, cands[i], cands[j], shown) {
							pa++
						}
					}
				}
				qB += float64(pb) / float64(np)
				qA += float64(pa) / float64(np)
			}
			qB /= float64(len(q.Distractors))
			qA /= float64(len(q.Distractors))
			if exB {
				st.qExposedB++
			}
			if exA {
				st.qExposedA++
			}
			partB += qB
			partA += qA
			st.passB += qB
			st.passA += qA
		}
		if nq > 0 {
			sessB *= partB / float64(nq)
			sessA *= partA / float64(nq)
		}
	}
	st.sessB += sessB
	st.sessA += sessA
	st.sessions++
}

// pairAccepted reports whether some hedge form of x and y, in either
// order, is accepted for q.
func pairAccepted(q *skill.Question, x, y string, shown []string) bool {
	for _, f := range hedgeForms {
		for _, h := range []string{fmt.Sprintf(f, x, y), fmt.Sprintf(f, y, x)} {
			if len(h) <= skill.MaxAnswerBytes && skill.Judge(q, h, shown) {
				return true
			}
		}
	}
	return false
}

func (st *hedgeStats) report(t *testing.T, label string) {
	t.Logf("%s: %d questions, %d with distractors (%d with a worded variant); complete lists: %d of %d candidate pairs accepted",
		label, st.questions, st.listed, st.worded, st.fullAccepted, st.fullPairs)
	t.Logf("%s, one entry missing (%d scenarios): right answer + missing entry accepted in %d scenarios (%d questions) before, %d (%d) after stage 1b",
		label, st.scenarios, st.exposedB, st.qExposedB, st.exposedA, st.qExposedA)
	t.Logf("%s, random-pair script: per question %.4f before, %.4f after; whole session (one question per part) %.6f before, %.6f after",
		label, st.passB/float64(max(st.listed, 1)), st.passA/float64(max(st.listed, 1)), st.sessB/float64(st.sessions), st.sessA/float64(st.sessions))
}

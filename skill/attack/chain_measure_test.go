package attack_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/attack"
)

// chainProver is a white-box script for the chained rounds of an
// LLM-written or reworded set: it reads what the rounds share rather
// than what one narrative says. Its session remembers the narratives and
// questions shown so far and its own answers (as the wire allows), and
// answers with pick. It holds no model and no network.
type chainProver struct {
	name string
	pick func(st *chainState, c skill.Challenge) string
}

func (p *chainProver) Name() string               { return p.name }
func (p *chainProver) NewSession() skill.Answerer { return &chainState{p: p} }

type chainState struct {
	p         *chainProver
	narrs     []string
	questions []string
	answers   []string
}

func (s *chainState) Answer(ctx context.Context, c skill.Challenge) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	part := c.Round - 1
	if part < 0 || part > 7 {
		part = len(s.narrs)
	}
	for len(s.narrs) <= part {
		s.narrs = append(s.narrs, "")
		s.questions = append(s.questions, "")
	}
	s.narrs[part], s.questions[part] = c.Narrative, c.Question
	a := strings.TrimSpace(skill.CapBytes(s.p.pick(s, c), skill.MaxAnswerBytes))
	if a == "" {
		a = "unknown"
	}
	if len(s.answers) < 8 {
		s.answers = append(s.answers, a)
	}
	return a, nil
}

// pickNovel answers an entity question with the candidate that the
// current narrative introduces (no earlier narrative or question names
// it) in the sentence that best overlaps the question, the later on a
// tie (a report resolves at its end); numbers as attack.Chain.
func pickNovel(st *chainState, c skill.Challenge) string {
	if attack.ChainIsNumeric(c.Question) {
		return attack.ChainPick(nil, st.answers, c.Narrative, c.Question)
	}
	qw := attack.ChainQWords(c.Question)
	best, bestScore := "", math.Inf(-1)
	earlier := strings.Join(st.narrs[:max(len(st.narrs)-1, 0)], "\n") + "\n" + strings.Join(st.questions, "\n")
	for i, cand := range attack.ChainCands(c.Narrative) {
		if strings.Contains(earlier, cand) || strings.Contains(c.Question, cand) {
			continue
		}
		o, neg := attack.ChainSentenceOverlap(c.Narrative, cand, qw)
		s := float64(o) + 0.001*float64(i)
		if neg {
			s -= 2
		}
		if s > bestScore {
			best, bestScore = cand, s
		}
	}
	return best
}

// learnerProver is a script that keeps what it learns across sessions:
// for every round (narrative and question) it tries the candidates of its
// pool in turn (the names, codes and numbers the narrative writes) and
// keeps the one a verdict confirms: a session ends at its first wrong
// answer and its verdict names that round (FailedRound), so every round
// before it, and every round of an accepted session, was answered right.
// It passes where one script is served the same set more than once (a
// corpus, a verifier with --max-serves above 1, an eval run); a verifier
// serves each set once by default (skill.DefaultMaxServes).
type learnerProver struct {
	tried     map[string]int
	confirmed map[string]string
}

func newLearner() *learnerProver {
	return &learnerProver{tried: map[string]int{}, confirmed: map[string]string{}}
}

func (p *learnerProver) NewSession() skill.Answerer { return &learnerSession{p: p} }

// learn reads a session's verdict as the wire gives it to the prover.
func (p *learnerProver) learn(s *learnerSession, v skill.Verdict) {
	for i, k := range s.keys {
		if v.Accepted || i+1 < v.FailedRound {
			p.confirmed[k] = s.answers[i]
		}
	}
}

type learnerSession struct {
	p       *learnerProver
	keys    []string
	answers []string
}

func (s *learnerSession) Answer(ctx context.Context, c skill.Challenge) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	key := c.Narrative + "\x00" + c.Question
	ans, ok := s.p.confirmed[key]
	if !ok {
		pool := attack.ChainCands(c.Narrative)
		pool = append(pool, attack.ChainNumbers(c.Narrative)...)
		i := s.p.tried[key]
		s.p.tried[key] = i + 1
		if len(pool) > 0 {
			ans = pool[i%len(pool)]
		}
	}
	if len(s.keys) < 8 {
		s.keys = append(s.keys, key)
		s.answers = append(s.answers, ans)
	}
	return skill.CapBytes(ans, skill.MaxAnswerBytes), nil
}

// chainAttackers returns the chained-round scripts.
func chainAttackers() []attack.Named {
	return []attack.Named{
		attack.Chain(),
		{Name: "chain-novel", Description: "the candidate the current narrative introduces, in the sentence that best overlaps the question", Prover: &chainProver{name: "chain-novel", pick: pickNovel}},
		{Name: "para-first", Description: "the first name, code or number of the paragraph that best overlaps the question", Prover: &chainProver{name: "para-first", pick: paraAttacker(false)}},
		{Name: "para-last", Description: "the last name, code or number of the paragraph that best overlaps the question", Prover: &chainProver{name: "para-last", pick: paraAttacker(true)}},
	}
}

var paraNumRe = regexp.MustCompile(`-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?`)

// paraAttacker answers from the paragraph (a block between blank lines,
// or a line) that best overlaps the question, the later on a tie: with
// its first (last: the resolving sentence) name or code the question
// does not write, or for a numeric question its first (last) number.
func paraAttacker(last bool) func(st *chainState, c skill.Challenge) string {
	return func(st *chainState, c skill.Challenge) string {
		qw := attack.ChainQWords(c.Question)
		paras := regexp.MustCompile(`\n\s*\n|\n`).Split(c.Narrative, -1)
		best, bo := "", -1
		for _, p := range paras {
			if o := attack.ChainOverlap(p, qw); o >= bo && strings.TrimSpace(p) != "" {
				best, bo = p, o
			}
		}
		var pool []string
		if attack.ChainIsNumeric(c.Question) {
			for _, m := range paraNumRe.FindAllStringIndex(best, -1) {
				if m[0] > 0 && strings.ContainsAny(best[m[0]-1:m[0]], "-/ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz") {
					continue // part of a code
				}
				pool = append(pool, best[m[0]:m[1]])
			}
		} else {
			for _, cand := range attack.ChainCands(best) {
				if !strings.Contains(c.Question, cand) {
					pool = append(pool, cand)
				}
			}
		}
		if len(pool) == 0 {
			return ""
		}
		if last {
			return pool[len(pool)-1]
		}
		return pool[0]
	}
}

// TestMeasureChainAttackers (CHAIN_MEASURE=<sessions>; skipped without the
// LLM corpus) measures, on the sets the offline validator keeps (as
// acaptcha eval serves them), the chained-round scripts (whitebox-chain,
// attack.Chain, in the validator's filter since generation.md 1.1.18: the
// candidate the earlier narratives and the script's own answers share;
// chain-novel: the candidate the current narrative introduces; both with
// numbers combined from the script's own earlier answer), the paragraph
// position scripts and the cross-session learner: questions answered of
// those kept, in some context of earlier rounds, and sessions passed
// (skill.Run) over sets drawn uniformly from those kept. The learner
// keeps its memory across the sessions of a source, as a script facing
// reused sets would.
//
// Measured (CHAIN_MEASURE=2000, with the generation.md 1.1.17 filter,
// before whitebox-chain joined it): LLM sets, 8 kept, 38 questions:
// whitebox-chain 0, chain-novel 0, sessions 0/2000 each; hybrids, 2 kept,
// 10 questions: whitebox-chain 1 (a part-1 entity, 0/2000 sessions; the
// 1.1.18 filter drops it), chain-novel 0 (0/2000). para-first and
// para-last (first and last candidate of the best-overlapping
// paragraph): 0 of 38 and 0 of 10, 0/2000 sessions each (CHAIN_ONLY=<name>
// runs one). The learner on the LLM sets: 5/2000 in its first 2,000
// sessions (250 per set), then 151, 106, 117, 123 of each next 2,000
// (about 6 %: the answers the narratives write verbatim; computed ones
// are in no pool); hybrids 0/10,000.
func TestMeasureChainAttackers(t *testing.T) {
	n := 0
	fmt.Sscan(os.Getenv("CHAIN_MEASURE"), &n)
	if n == 0 {
		t.Skip("set CHAIN_MEASURE=<sessions> to measure")
	}
	verbose := os.Getenv("CHAIN_VERBOSE") != ""
	forKeptCorpusSets(t, func(pat string, _ skill.SourceKind, kept []*skill.Set) {
		if len(kept) == 0 {
			t.Logf("%s: no set kept", pat)
			return
		}
		for _, a := range chainAttackers() {
			if os.Getenv("CHAIN_LEARNER_ONLY") != "" {
				break
			}
			if only := os.Getenv("CHAIN_ONLY"); only != "" && only != a.Name {
				continue
			}
			p := a.Prover
			nq, hit := 0, 0
			for _, set := range kept {
				for k := range set.Parts {
					for j := range set.Parts[k].Questions {
						ok, ans := answeredInSomeContext(t, set, p, k, j)
						nq++
						if ok {
							hit++
						}
						if verbose {
							t.Logf("%s %s %s p%d: %v %q want %q", a.Name, pat, set.Domain, k+1, ok, ans, set.Parts[k].Questions[j].Answer)
						}
					}
				}
			}
			t.Logf("%-22s %-20s sets %d kept, questions kept %d, answered %d; sessions passed %d/%d", pat, a.Name, len(kept), nq, hit, chSessions(t, kept, p, n), n)
		}
		l := newLearner()
		for b := 0; b < 5; b++ {
			t.Logf("%-22s %-20s sets %d kept; sessions %d-%d: passed %d/%d (memory across sessions)", pat, "cross-session-learner", len(kept), b*n+1, (b+1)*n, chSessions(t, kept, l, n), n)
		}
	})
}

// chSessions runs n sessions, each on a set drawn uniformly from sets,
// and counts those accepted.
func chSessions(t *testing.T, sets []*skill.Set, p skill.Prover, n int) int {
	t.Helper()
	pass := 0
	pol := skill.DefaultPolicy()
	for i := 0; i < n; i++ {
		var b [1]byte
		if _, err := rand.Read(b[:]); err != nil {
			t.Fatal(err)
		}
		sess, err := skill.NewSession(sets[int(b[0])%len(sets)], pol, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		a := p.NewSession()
		v := skill.Run(context.Background(), sess, a, nil)
		if v.Reason == skill.ReasonOK {
			pass++
		}
		if l, ok := p.(*learnerProver); ok {
			l.learn(a.(*learnerSession), v)
		}
	}
	return pass
}

// unicodeJoins are characters and marks a script could put between two
// candidates hoping the judge reads one answer while covering both:
// format characters (zero-width space, joiners, word joiner, soft hyphen,
// BOM, Mongolian vowel separator), separators the explanation rule does
// not split at (U+0085, U+2028, U+2029, ideographic space, tab), and
// symbols no rule names.
var unicodeJoins = []string{"\u200b", "\u200c", "\u200d", "\u2060", "\u00ad", "\ufeff", "\u180e", "\u0085", "\u2028", "\u2029", "\u3000", "\t", " & ", " + ", " / ", " | ", " · ", " • ", "…", " ~ ", " → ", "\u0301 "}

// TestMeasureUnicodeJoins (UNICODE_JOINS_MEASURE=1; skipped without the
// LLM corpus) joins, on every question the offline validator keeps, each
// accepted variant with every other name, code and number the shown
// narratives write (both orders) by each of unicodeJoins, and counts the
// strings the judge accepts: each would let a script cover two
// candidates with one answer. Only names the judge refuses beside the
// variant with a plain space count (a question word or, for a number, a
// description word is padding it allows anyway). With the variant first, a join the
// explanation rule splits at (the arrow) leaves a free tail after a
// right head, as "X — Y" does (verification.md, Explanation), so the
// figure that matters is the pairs accepted in both orders (must be 0).
// Measured at verification.md 1.5.29: LLM sets 203,104 strings, 9,232
// accepted with the variant first, every one across the arrow, 0 in both
// orders; hybrids 64,658, 2,939, 0.
func TestMeasureUnicodeJoins(t *testing.T) {
	if os.Getenv("UNICODE_JOINS_MEASURE") == "" {
		t.Skip("set UNICODE_JOINS_MEASURE=1 to measure")
	}
	forKeptCorpusSets(t, func(pat string, _ skill.SourceKind, kept []*skill.Set) {
		n, acc, both := 0, 0, 0
		for _, set := range kept {
			for k := range set.Parts {
				narr := attack.NarrativesUpTo(set, k)
				var pool []string
				for _, x := range narr {
					pool = append(pool, attack.ChainCands(x)...)
					pool = append(pool, attack.ChainNumbers(x)...)
				}
				slices.Sort(pool)
				pool = slices.Compact(pool)
				for j := range set.Parts[k].Questions {
					q := &set.Parts[k].Questions[j]
					for _, v := range q.Variants() {
						for _, y := range pool {
							if skill.Judge(q, y, narr) || strings.Contains(strings.ToLower(v), strings.ToLower(y)) || strings.Contains(strings.ToLower(y), strings.ToLower(v)) {
								continue // y is itself a right answer, or part of v
							}
							if skill.Judge(q, v+" "+y, narr) || skill.Judge(q, y+" "+v, narr) {
								continue // y is padding the judge allows beside v (a question or description word)
							}
							for _, j := range unicodeJoins {
								a, b := v+j+y, y+j+v
								if len(a) > skill.MaxAnswerBytes {
									continue
								}
								n++
								okA, okB := skill.Judge(q, a, narr), skill.Judge(q, b, narr)
								if okA {
									acc++
									if !strings.Contains(j, "→") {
										t.Logf("%s %s p%d: accepted %q where %q is refused (variants %v)", pat, set.Domain, k+1, a, v+" "+y, q.Variants())
									}
								}
								if okA && okB {
									both++
									t.Logf("%s %s p%d: accepted in both orders %q (variants %v)", pat, set.Domain, k+1, a, q.Variants())
								}
							}
						}
					}
				}
			}
		}
		t.Logf("%-22s unicode-joined pairs: %d, accepted with the variant first %d (an arrow leaves a free tail), in both orders %d", pat, n, acc, both)
	})
}

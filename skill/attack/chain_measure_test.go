package attack_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"sort"
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

var (
	chCapRun  = regexp.MustCompile(`[A-Z][\w'’-]*(?:[ ](?:[A-Z][\w'’-]*|\d[\w/-]*)){0,3}`)
	chCode    = regexp.MustCompile(`\b[A-Za-z]+[-]?\d[\w/-]*\b|\b\d+[A-Za-z][\w-]*\b|\b\d{3,}/\d+\b`)
	chNumQ    = regexp.MustCompile(`(?i)\b(how (?:many|much|long)|by (?:how|what)|what (?:is|was) the (?:\w+ ){0,3}(?:value|amount|score|depth|rate|total|mean|range|penalty)|in (?:pounds|euros|dollars|km|µm|kg/ha|t/ha)|what \w+ score|what (?:net|total|mean|final))\b`)
	chStop    = map[string]bool{}
	chSentEnd = regexp.MustCompile(`[.!?;]\s+|\n+`)
	chNumRe   = regexp.MustCompile(`-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?`)
	chNegCue  = regexp.MustCompile(`(?i)\b(ruled out|set aside|explained|traced to|cleared|withdrawn|dropped|drops|excluded|one-off|artefact|not|no longer|instead)\b`)
)

func init() {
	for _, w := range strings.Fields("The A An In On At By For To Of With From After Before Once Our Its Their This That These Those It Under Over Between During Which What How When Where Who Whose Why Only All Each Every Both Neither Either No Not Nothing Some Any Then Since Because But And Or If So As Also Still Yet Early Late First Second Third Note Notes Interim Purpose Entries Entry Board Meeting") {
		chStop[w] = true
	}
}

// chCands lists the candidate names and codes of a text, in order.
func chCands(text string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(c string) {
		c = strings.Trim(c, " ,.;:'’-")
		fs := strings.Fields(c)
		for len(fs) > 0 && chStop[fs[0]] {
			fs = fs[1:]
		}
		c = strings.Join(fs, " ")
		if c == "" || len(c) < 2 || seen[c] {
			return
		}
		seen[c] = true
		out = append(out, c)
	}
	for _, m := range chCode.FindAllString(text, -1) {
		add(m)
	}
	for _, m := range chCapRun.FindAllString(text, -1) {
		add(m)
	}
	return out
}

func chQWords(q string) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(q), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-')
	}) {
		if len(w) > 3 {
			out[w] = true
		}
	}
	return out
}

func chSentences(text string) []string { return chSentEnd.Split(text, -1) }

func chOverlap(sent string, qw map[string]bool) int {
	n := 0
	for w := range chQWords(sent) {
		if qw[w] {
			n++
		}
	}
	return n
}

// chBestSentOverlap is the best question overlap of a sentence of text
// that holds c.
func chBestSentOverlap(text, c string, qw map[string]bool) (best int, neg bool) {
	best = -1
	for _, s := range chSentences(text) {
		if strings.Contains(s, c) {
			if o := chOverlap(s, qw); o > best {
				best, neg = o, chNegCue.MatchString(s)
			}
		}
	}
	return best, neg
}

// pickThread answers an entity question with the candidate of the
// current narrative that the earlier narratives mention most (the thread
// the chained rounds follow), by question overlap on a tie; a numeric
// question with the number of the best-overlapping sentence that
// follows the script's own earlier numeric answer's arithmetic (none:
// the sentence's first number).
func pickThread(st *chainState, c skill.Challenge) string {
	if chNumQ.MatchString(c.Question) {
		return chNumber(st, c)
	}
	qw := chQWords(c.Question)
	type sc struct {
		c     string
		score float64
		pos   int
	}
	var ranked []sc
	for i, cand := range chCands(c.Narrative) {
		if strings.Contains(c.Question, cand) {
			continue
		}
		s := 0.0
		for _, n := range st.narrs[:max(len(st.narrs)-1, 0)] {
			if strings.Contains(n, cand) {
				s += 10
			}
		}
		for _, a := range st.answers {
			if strings.Contains(a, cand) || strings.Contains(cand, a) {
				s += 5
			}
		}
		o, neg := chBestSentOverlap(c.Narrative, cand, qw)
		s += float64(o)
		if neg {
			s -= 3
		}
		s += 0.1 * float64(strings.Count(c.Narrative, cand))
		ranked = append(ranked, sc{cand, s, i})
	}
	if len(ranked) == 0 {
		return ""
	}
	sort.SliceStable(ranked, func(i, j int) bool { return ranked[i].score > ranked[j].score })
	return ranked[0].c
}

// pickNovel answers an entity question with the candidate that the
// current narrative introduces (no earlier narrative or question names
// it) in the sentence that best overlaps the question, the later on a
// tie (a report resolves at its end); numbers as pickThread.
func pickNovel(st *chainState, c skill.Challenge) string {
	if chNumQ.MatchString(c.Question) {
		return chNumber(st, c)
	}
	qw := chQWords(c.Question)
	best, bestScore := "", math.Inf(-1)
	earlier := strings.Join(st.narrs[:max(len(st.narrs)-1, 0)], "\n") + "\n" + strings.Join(st.questions, "\n")
	for i, cand := range chCands(c.Narrative) {
		if strings.Contains(earlier, cand) || strings.Contains(c.Question, cand) {
			continue
		}
		o, neg := chBestSentOverlap(c.Narrative, cand, qw)
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

// chNumber answers a numeric question from the sentence that best
// overlaps it: with the script's own earlier numeric answer combined with
// that sentence's first number by the question's cue (a product for a
// rate over time, a sum for "final"/"total", a difference for "by how
// many"/"after"), or that number alone.
func chNumber(st *chainState, c skill.Challenge) string {
	qw := chQWords(c.Question)
	best, bo := "", -1
	for _, s := range chSentences(c.Narrative) {
		if !chNumRe.MatchString(s) {
			continue
		}
		if o := chOverlap(s, qw); o > bo {
			best, bo = s, o
		}
	}
	if best == "" {
		return ""
	}
	first := strings.ReplaceAll(chNumRe.FindString(best), ",", "")
	var prev float64
	havePrev := false
	for i := len(st.answers) - 1; i >= 0; i-- {
		if m := chNumRe.FindString(st.answers[i]); m != "" {
			fmt.Sscan(strings.ReplaceAll(m, ",", ""), &prev)
			havePrev = true
			break
		}
	}
	var x float64
	fmt.Sscan(first, &x)
	q := strings.ToLower(c.Question)
	if havePrev {
		switch {
		case strings.Contains(q, "final") || strings.Contains(q, "total") || strings.Contains(q, "restated"):
			return chFmt(prev + x)
		case strings.Contains(q, "by how") || strings.Contains(q, "after") || strings.Contains(q, "remain"):
			return chFmt(prev - x)
		case strings.Contains(q, "off") || strings.Contains(q, "per"):
			return chFmt(prev * x)
		}
	}
	return first
}

func chFmt(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
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
		pool := chCands(c.Narrative)
		pool = append(pool, chNumRe.FindAllString(c.Narrative, -1)...)
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
		{Name: "chain-thread", Description: "the candidate of the current narrative the earlier narratives and the script's own answers share", Prover: &chainProver{name: "chain-thread", pick: pickThread}},
		{Name: "chain-novel", Description: "the candidate the current narrative introduces, in the sentence that best overlaps the question", Prover: &chainProver{name: "chain-novel", pick: pickNovel}},
		{Name: "para-first", Description: "the first name, code or number of the paragraph that best overlaps the question", Prover: &chainProver{name: "para-first", pick: paraAttacker(false)}},
		{Name: "para-last", Description: "the last name, code or number of the paragraph that best overlaps the question", Prover: &chainProver{name: "para-last", pick: paraAttacker(true)}},
	}
}

// paraAttacker answers from the paragraph (a block between blank lines,
// or a line) that best overlaps the question, the later on a tie: with
// its first (last: the resolving sentence) name or code the question
// does not write, or for a numeric question its first (last) number.
func paraAttacker(last bool) func(st *chainState, c skill.Challenge) string {
	return func(st *chainState, c skill.Challenge) string {
		qw := chQWords(c.Question)
		paras := regexp.MustCompile(`\n\s*\n|\n`).Split(c.Narrative, -1)
		best, bo := "", -1
		for _, p := range paras {
			if o := chOverlap(p, qw); o >= bo && strings.TrimSpace(p) != "" {
				best, bo = p, o
			}
		}
		var pool []string
		if chNumQ.MatchString(c.Question) {
			for _, m := range chNumRe.FindAllStringIndex(best, -1) {
				if m[0] > 0 && strings.ContainsAny(best[m[0]-1:m[0]], "-/ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz") {
					continue // part of a code
				}
				pool = append(pool, best[m[0]:m[1]])
			}
		} else {
			for _, cand := range chCands(best) {
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
// acaptcha eval serves them), the chained-round scripts (chain-thread:
// the candidate the earlier narratives and the script's own answers
// share; chain-novel: the candidate the current narrative introduces;
// both with numbers combined from the script's own earlier answer) and
// the cross-session learner: questions answered of those kept, in some
// context of earlier rounds, and sessions passed (skill.Run) over sets
// drawn uniformly from those kept. The learner keeps its memory across
// the sessions of a source, as a script facing reused sets would.
//
// Measured (CHAIN_MEASURE=2000, generation.md 1.1.17 filter): LLM sets,
// 8 kept, 38 questions: chain-thread 0, chain-novel 0, sessions 0/2000
// each; hybrids, 2 kept, 10 questions: chain-thread 1 (a part-1 entity,
// 0/2000 sessions), chain-novel 0 (0/2000). para-first and para-last
// (first and last candidate of the best-overlapping paragraph): 0 of 38
// and 0 of 10, 0/2000 sessions each (CHAIN_ONLY=<name> runs one). The learner on the LLM sets:
// 5/2000 in its first 2,000 sessions (250 per set), then 151, 106, 117,
// 123 of each next 2,000 (about 6 %: the answers the narratives write
// verbatim; computed ones are in no pool); hybrids 0/10,000.
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
					pool = append(pool, chCands(x)...)
					pool = append(pool, chNumRe.FindAllString(x, -1)...)
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

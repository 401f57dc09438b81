package attack

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/acaptcha/acaptcha/skill"
)

// WhiteBoxChain is the chained-round attacker's name.
const WhiteBoxChain = "whitebox-chain"

// Chain is a structure attacker for the chained rounds the generation
// prompt asks for (a later part's questions build on the earlier parts'
// answers): it answers an entity question with the name or code of the
// current narrative that the earlier narratives and its own earlier
// answers carry on, then the one whose sentence best overlaps the
// question less the sentences that set candidates aside ("ruled out",
// "explained", "traced to"), then the one written most; a numeric
// question with the first number of the sentence that best overlaps it,
// combined by the question's cue ("final", "total", "restated": a sum;
// "by how", "after", "remain": a difference; "off", "per": a product)
// with its own earlier numeric answer when it gave one. Measured by
// TestMeasureChainAttackers: 1 of the 10 questions the
// generation.md 1.1.17 filter kept on the shared hybrid rewordings (a
// part-1 entity), 0 of the 38 kept on the LLM-written sets, 0 sessions.
func Chain() Named {
	return Named{
		Name:        WhiteBoxChain,
		Description: "reads the chained rounds: the name or code the earlier narratives and its own answers carry on, by question overlap less set-aside sentences; numbers combined with its own earlier answer by the question's cue",
		Prover: &wbProver{name: WhiteBoxChain, solve: func(s *wbSession, part int, c *skill.Challenge) string {
			return chainPick(s.narratives[:part], s.answers, c.Narrative, c.Question)
		}},
	}
}

var (
	chCapRun  = regexp.MustCompile(`[A-Z][\w'’-]*(?:[ ](?:[A-Z][\w'’-]*|\d[\w/-]*)){0,3}`)
	chCode    = regexp.MustCompile(`\b[A-Za-z]+[-]?\d[\w/-]*\b|\b\d+[A-Za-z][\w-]*\b|\b\d{3,}/\d+\b`)
	chNumQ    = regexp.MustCompile(`(?i)\b(how (?:many|much|long)|by (?:how|what)|what (?:is|was) the (?:\w+ ){0,3}(?:value|amount|score|depth|rate|total|mean|range|penalty)|in (?:pounds|euros|dollars|km|µm|kg/ha|t/ha)|what \w+ score|what (?:net|total|mean|final))\b`)
	chSentEnd = regexp.MustCompile(`[.!?;]\s+|\n+`)
	chNumRe   = regexp.MustCompile(`-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?`)
	chNegCue  = regexp.MustCompile(`(?i)\b(ruled out|set aside|explained|traced to|cleared|withdrawn|dropped|drops|excluded|one-off|artefact|not|no longer|instead)\b`)
	chStop    = toSet("The A An In On At By For To Of With From After Before Once Our Its Their This That These Those It Under Over Between During Which What How When Where Who Whose Why Only All Each Every Both Neither Either No Not Nothing Some Any Then Since Because But And Or If So As Also Still Yet Early Late First Second Third Note Notes Interim Purpose Entries Entry Board Meeting")
)

// chainIsNumeric reports whether the chained-round attacker reads
// question as asking for a number.
func chainIsNumeric(question string) bool { return chNumQ.MatchString(question) }

// chainNumbers lists the numbers text writes, as written.
func chainNumbers(text string) []string { return chNumRe.FindAllString(text, -1) }

// chainCands lists the names (runs of capitalised words, a leading
// sentence word dropped) and codes of a text, codes first, each once.
func chainCands(text string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(c string) {
		c = strings.Trim(c, " ,.;:'’-")
		fs := strings.Fields(c)
		for len(fs) > 0 && chStop[fs[0]] {
			fs = fs[1:]
		}
		c = strings.Join(fs, " ")
		if len(c) < 2 || seen[c] {
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

// chainQWords are the lower-cased words of more than three letters of q.
func chainQWords(q string) map[string]bool {
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

// chainOverlap counts the words of qw that s writes.
func chainOverlap(s string, qw map[string]bool) int {
	n := 0
	for w := range chainQWords(s) {
		if qw[w] {
			n++
		}
	}
	return n
}

// chainSentenceOverlap is the best question overlap of a sentence of text
// that holds c (-1 when none does), and whether that sentence sets a
// candidate aside.
func chainSentenceOverlap(text, c string, qw map[string]bool) (best int, neg bool) {
	best = -1
	for _, s := range chainDocShared(text).sents {
		if strings.Contains(s.text, c) {
			if o := s.overlap(qw); o > best {
				best, neg = o, s.neg
			}
		}
	}
	return best, neg
}

// chainDoc is what the chained-round attacker reads of a text, whatever
// the question: its sentences and candidates.
type chainDoc struct {
	sents []chainSent
	cands []chainCand
}

// chainSent is a sentence (a piece of chSentEnd.Split) with what the
// attacker reads of it.
type chainSent struct {
	text     string
	words    []string // the keys of chainQWords(text), sorted
	neg      bool     // chNegCue matches
	firstNum string   // the first match of chNumRe, "" when none
}

// overlap is chainOverlap(s.text, qw).
func (s *chainSent) overlap(qw map[string]bool) int {
	n := 0
	for _, w := range s.words {
		if qw[w] {
			n++
		}
	}
	return n
}

// chainCand is a candidate of chainCands and how often the text writes it.
type chainCand struct {
	text  string
	count int
}

func parseChainDoc(text string) *chainDoc {
	d := &chainDoc{}
	for _, t := range chSentEnd.Split(text, -1) {
		st := chainSent{text: t, neg: chNegCue.MatchString(t), firstNum: chNumRe.FindString(t)}
		st.words = slices.Sorted(maps.Keys(chainQWords(t)))
		d.sents = append(d.sents, st)
	}
	for _, c := range chainCands(text) {
		d.cands = append(d.cands, chainCand{c, strings.Count(text, c)})
	}
	return d
}

// chainDocShared is parseChainDoc, memoized for texts up to memoMaxText.
// The doc is only read.
func chainDocShared(text string) *chainDoc {
	if len(text) > memoMaxText {
		return parseChainDoc(text)
	}
	return chainMemo.get(text, func() *chainDoc { return parseChainDoc(text) })
}

// chainPick is the chained-round attacker's answer to question about
// narrative, after the earlier narratives and its own earlier answers.
func chainPick(earlier, answers []string, narrative, question string) string {
	if chNumQ.MatchString(question) {
		return chainNumber(answers, narrative, question)
	}
	qw := chainQWords(question)
	d := chainDocShared(narrative)
	overlaps := make([]int, len(d.sents))
	for i := range d.sents {
		overlaps[i] = d.sents[i].overlap(qw)
	}
	type ranked struct {
		c     string
		score float64
	}
	var rs []ranked
	for _, cc := range d.cands {
		cand := cc.text
		if strings.Contains(question, cand) {
			continue
		}
		s := 0.0
		for _, n := range earlier {
			if strings.Contains(n, cand) {
				s += 10
			}
		}
		for _, a := range answers {
			if strings.Contains(a, cand) || strings.Contains(cand, a) {
				s += 5
			}
		}
		// The best-overlapping sentence that holds the candidate, less
		// 3 when it sets candidates aside.
		o, neg := -1, false
		for i, st := range d.sents {
			if overlaps[i] > o && strings.Contains(st.text, cand) {
				o, neg = overlaps[i], st.neg
			}
		}
		s += float64(o)
		if neg {
			s -= 3
		}
		s += 0.1 * float64(cc.count)
		rs = append(rs, ranked{cand, s})
	}
	if len(rs) == 0 {
		return ""
	}
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].score > rs[j].score })
	return rs[0].c
}

// chainNumber answers a numeric question from the sentence that best
// overlaps it: its first number, combined by the question's cue with the
// attacker's own latest numeric answer when there is one.
func chainNumber(answers []string, narrative, question string) string {
	qw := chainQWords(question)
	var best *chainSent
	bo := -1
	d := chainDocShared(narrative)
	for i := range d.sents {
		s := &d.sents[i]
		if s.firstNum == "" {
			continue
		}
		if o := s.overlap(qw); o > bo {
			best, bo = s, o
		}
	}
	if best == nil || best.text == "" {
		return ""
	}
	first := strings.ReplaceAll(best.firstNum, ",", "")
	var prev, x float64
	havePrev := false
	for i := len(answers) - 1; i >= 0; i-- {
		if m := chNumRe.FindString(answers[i]); m != "" {
			if _, err := fmt.Sscan(strings.ReplaceAll(m, ",", ""), &prev); err == nil {
				havePrev = true
			}
			break
		}
	}
	if _, err := fmt.Sscan(first, &x); err != nil {
		return first
	}
	q := strings.ToLower(question)
	if havePrev {
		switch {
		case strings.Contains(q, "final") || strings.Contains(q, "total") || strings.Contains(q, "restated"):
			return chainFmt(prev + x)
		case strings.Contains(q, "by how") || strings.Contains(q, "after") || strings.Contains(q, "remain"):
			return chainFmt(prev - x)
		case strings.Contains(q, "off") || strings.Contains(q, "per"):
			return chainFmt(prev * x)
		}
	}
	return first
}

func chainFmt(v float64) string {
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
}

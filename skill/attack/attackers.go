package attack

import (
	"context"
	"encoding/binary"
	"hash/fnv"
	"math"
	"sort"
	"strings"

	"github.com/acaptcha/acaptcha/skill"
)

// Named is a registered attacker: a stable name, a one-line description and
// the prover.
type Named struct {
	Name        string
	Description string
	Prover      skill.Prover
}

// Attacker names, stable across releases: reports and plots key on them.
const (
	Random            = "random"
	FirstEntity       = "first-entity"
	LastEntity        = "last-entity"
	MostFrequent      = "most-frequent"
	KeywordOverlap    = "keyword-overlap"
	CueProximity      = "cue-proximity"
	NegationElim      = "negation-elimination"
	NearestNumber     = "nearest-number"
	LabelPattern      = "label-pattern"
	RuleClause        = "rule-clause"
	RuleListFirst     = "rule-list-first"
	RuleListSecond    = "rule-list-second"
	RuleListPenult    = "rule-list-penultimate"
	RuleListLast      = "rule-list-last"
	Router            = "router"
	StatefulRouter    = "stateful-router"
	DefaultRandomSeed = 1
)

// All returns every attacker, in a stable order, with the random attacker
// seeded with DefaultRandomSeed.
func All() []Named { return AllSeeded(DefaultRandomSeed) }

// AllSeeded returns every attacker with the random attacker seeded by seed.
func AllSeeded(seed uint64) []Named {
	mk := func(name, desc string, f strategyFunc, stateful bool) Named {
		return Named{Name: name, Description: desc, Prover: &Prover{name: name, seed: seed, strategy: f, stateful: stateful}}
	}
	return []Named{
		mk(Random, "a uniformly random candidate of the guessed answer type (seeded, keyed by the challenge)", randomStrategy, false),
		mk(FirstEntity, "the first candidate of the guessed answer type in the narrative", positionStrategy(false), false),
		mk(LastEntity, "the last candidate of the guessed answer type in the narrative", positionStrategy(true), false),
		mk(MostFrequent, "the most often mentioned candidate of the guessed answer type", frequentStrategy, false),
		mk(KeywordOverlap, "a candidate from the sentence with the highest IDF-weighted overlap with the question", overlapStrategy, false),
		mk(CueProximity, "the candidate described with the most persistence/replication cue words", cueStrategy, false),
		mk(NegationElim, "drops candidates described with explanation/transience/negation cues, then picks by cue words", negationStrategy, false),
		mk(NearestNumber, "the candidate (a number, with unit agreement, for numeric questions) nearest the question's keywords", nearestStrategy, false),
		mk(LabelPattern, "a label-like word next to tier/class/category/grade/level/status patterns, chosen by keyword overlap", labelStrategy, false),
		mk(RuleClause, "the label after the first rule verb of the stated rule that best overlaps the question (\"more than 24 gives red status; ...\" -> red status)", ruleClauseStrategy, true),
		mk(RuleListFirst, "the first label the best-overlapping stated rule lists (first quoted label, first item after a colon, first list line)", ruleListFirstStrategy, true),
		mk(RuleListSecond, "the second label the best-overlapping stated rule of at least three lists (the middle case of three)", ruleListPlaceStrategy(1, 3), true),
		mk(RuleListPenult, "the label before the last that the best-overlapping stated rule of at least three lists", ruleListPlaceStrategy(-2, 3), true),
		mk(RuleListLast, "the last label the best-overlapping stated rule of at least two lists", ruleListPlaceStrategy(-1, 2), true),
		mk(Router, "routes by guessed answer type and combines all heuristics", routerStrategy, false),
		mk(StatefulRouter, "the router plus memory of its earlier answers and narratives in the session", statefulStrategy, true),
	}
}

// ByName returns the attacker with the given name from All.
func ByName(name string) (Named, bool) {
	for _, n := range All() {
		if n.Name == name {
			return n, true
		}
	}
	return Named{}, false
}

// Names lists the attacker names in registry order.
func Names() []string {
	var out []string
	for _, n := range All() {
		out = append(out, n.Name)
	}
	return out
}

// strategyFunc answers one round; it may read the session's memory.
type strategyFunc func(s *Session, d *doc, q *question, c *skill.Challenge) (answer, entKey string)

// Prover is a script attacker; it is safe for concurrent use and starts an
// independent Session per skill session.
type Prover struct {
	name     string
	seed     uint64
	strategy strategyFunc
	stateful bool
}

// Name returns the attacker's registry name.
func (p *Prover) Name() string { return p.name }

// NewSession implements skill.Prover.
func (p *Prover) NewSession() skill.Answerer { return &Session{p: p} }

// Session is one attacker session: it analyses each narrative once and
// remembers the rounds it has answered. It is not safe for concurrent use;
// a skill session asks its rounds one at a time.
type Session struct {
	p      *Prover
	rounds []memRound
}

type memRound struct {
	d      *doc
	q      *question
	answer string
	entKey string
}

// Limits on what an attacker analyses, so hostile input stays bounded.
const (
	maxNarrativeBytes = 256 << 10
	maxQuestionBytes  = 4 << 10
	maxMemory         = 8
)

// Answer implements skill.Answerer.
func (s *Session) Answer(ctx context.Context, c skill.Challenge) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	c.Narrative = skill.CapBytes(c.Narrative, maxNarrativeBytes)
	c.Question = skill.CapBytes(c.Question, maxQuestionBytes)
	d := analyseShared(c.Narrative)
	q := analyseQuestionShared(c.Question)
	ans, key := s.p.strategy(s, d, q, &c)
	ans = strings.TrimSpace(ans)
	if ans == "" {
		ans = fallback
	}
	ans = skill.CapBytes(ans, skill.MaxAnswerBytes)
	if len(s.rounds) < maxMemory {
		m := memRound{q: q, answer: ans, entKey: key}
		if s.p.stateful {
			m.d = d
		}
		s.rounds = append(s.rounds, m)
	}
	return ans, nil
}

// --- baseline strategies ------------------------------------------------

// typedPool lists the candidate answers of the guessed type with their
// token position and mention key.
type pooled struct {
	text string
	key  string
	tok  int
}

func typedPool(d *doc, q *question) []pooled {
	var out []pooled
	switch q.kind {
	case qNumeric:
		for _, i := range d.numPool(q) {
			n := d.nums[i]
			out = append(out, pooled{text: n.answer, key: n.answer, tok: n.tok})
		}
	case qLabel:
		for _, l := range d.labelPool(q) {
			out = append(out, pooled{text: l.text, key: lower(l.text), tok: l.tok})
		}
	}
	if len(out) > 0 {
		return out
	}
	v := viewShared(d, q)
	for _, ci := range v.pool {
		c := &d.cands[ci]
		for _, m := range c.ments {
			out = append(out, pooled{text: c.text, key: c.key, tok: m.tok})
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].tok < out[b].tok })
	return out
}

func randomStrategy(s *Session, d *doc, q *question, c *skill.Challenge) (string, string) {
	pool := distinct(typedPool(d, q))
	if len(pool) == 0 {
		return fallback, ""
	}
	h := fnv.New64a()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], s.p.seed)
	h.Write(b[:])
	binary.BigEndian.PutUint64(b[:], uint64(c.Round))
	h.Write(b[:])
	h.Write([]byte(c.Narrative))
	h.Write([]byte{0})
	h.Write([]byte(c.Question))
	p := pool[h.Sum64()%uint64(len(pool))]
	return p.text, p.key
}

// distinct keeps the first occurrence of every key.
func distinct(ps []pooled) []pooled {
	seen := map[string]bool{}
	var out []pooled
	for _, p := range ps {
		if !seen[p.key] {
			seen[p.key] = true
			out = append(out, p)
		}
	}
	return out
}

func positionStrategy(last bool) strategyFunc {
	return func(_ *Session, d *doc, q *question, _ *skill.Challenge) (string, string) {
		pool := typedPool(d, q)
		if len(pool) == 0 {
			return fallback, ""
		}
		sort.SliceStable(pool, func(a, b int) bool { return pool[a].tok < pool[b].tok })
		p := pool[0]
		if last {
			p = pool[len(pool)-1]
		}
		return p.text, p.key
	}
}

func frequentStrategy(_ *Session, d *doc, q *question, _ *skill.Challenge) (string, string) {
	pool := typedPool(d, q)
	if len(pool) == 0 {
		return fallback, ""
	}
	count := map[string]int{}
	for _, p := range pool {
		count[p.key]++
	}
	best := pool[0]
	for _, p := range pool {
		if count[p.key] > count[best.key] {
			best = p
		}
	}
	return best.text, best.key
}

// overlapStrategy picks the sentence that shares the most (IDF-weighted)
// words with the question and answers with the candidate of the guessed
// type in it that sits closest to the shared words; it walks down the
// sentence ranking until one has such a candidate.
func overlapStrategy(_ *Session, d *doc, q *question, _ *skill.Challenge) (string, string) {
	w := d.keyWeights(q, nil)
	type ranked struct {
		si    int
		score float64
	}
	rs := make([]ranked, len(d.sents))
	for si, s := range d.sents {
		seen := map[string]bool{}
		sc := 0.0
		for k := s.start; k < s.end; k++ {
			st := d.toks[k].st
			if x, ok := w[st]; ok && !seen[st] {
				seen[st] = true
				sc += x
			}
		}
		rs[si] = ranked{si, sc}
	}
	sort.SliceStable(rs, func(a, b int) bool { return rs[a].score > rs[b].score })
	pool := typedPool(d, q)
	for _, r := range rs {
		s := d.sents[r.si]
		best, bestS := -1, math.Inf(-1)
		for i, p := range pool {
			if p.tok < s.start || p.tok >= s.end {
				continue
			}
			if sc := d.proximity(p.tok, w); sc > bestS {
				best, bestS = i, sc
			}
		}
		if best >= 0 {
			return pool[best].text, pool[best].key
		}
	}
	return fallback, ""
}

// cueStrategy scores every candidate by the positive cue words in the
// clauses that describe it (numbers and labels by their clause).
func cueStrategy(_ *Session, d *doc, q *question, _ *skill.Challenge) (string, string) {
	switch q.kind {
	case qNumeric, qLabel:
		pool := distinctTok(typedPool(d, q))
		if len(pool) > 0 && q.kind == qNumeric || len(pool) > 0 && len(d.labels) > 0 {
			best := argmax(idx(len(pool)), func(i int) float64 {
				cl := d.clause(pool[i].tok)
				var p float64
				for k := cl.a; k < cl.b; k++ {
					p += float64(d.toks[k].pos)
				}
				return p
			}, func(i int) int { return pool[i].tok })
			return pool[best].text, ""
		}
	}
	v := viewShared(d, q)
	best := argmax(v.pool, func(ci int) float64 { return v.evidence(ci, nil).pos }, d.firstMention)
	if best < 0 {
		return fallback, ""
	}
	return d.cands[best].text, d.cands[best].key
}

func distinctTok(ps []pooled) []pooled {
	seen := map[int]bool{}
	var out []pooled
	for _, p := range ps {
		if !seen[p.tok] {
			seen[p.tok] = true
			out = append(out, p)
		}
	}
	return out
}

func idx(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// negationStrategy eliminates every candidate whose description carries a
// negative cue (explained away, transient, single observation, preliminary
// and later revised) and picks the survivor with the most positive cues;
// for numbers and labels it drops the clauses with negative cues and
// answers by keyword proximity among the rest.
func negationStrategy(_ *Session, d *doc, q *question, _ *skill.Challenge) (string, string) {
	w := d.keyWeights(q, nil)
	switch q.kind {
	case qNumeric, qLabel:
		pool := distinctTok(typedPool(d, q))
		var keep []int
		for i, p := range pool {
			cl := d.clause(p.tok)
			var neg float64
			for k := cl.a; k < cl.b; k++ {
				neg += float64(d.toks[k].neg)
			}
			if neg < 1 && !d.sents[d.toks[p.tok].sent].prelim {
				keep = append(keep, i)
			}
		}
		if len(keep) == 0 {
			keep = idx(len(pool))
		}
		if len(keep) > 0 {
			best := argmax(keep, func(i int) float64 { return d.proximity(pool[i].tok, w) }, func(i int) int { return pool[i].tok })
			return pool[best].text, ""
		}
	}
	v := viewShared(d, q)
	type ev struct {
		ci int
		e  evidence
	}
	var survivors, all []ev
	for _, ci := range v.pool {
		e := v.evidence(ci, w)
		all = append(all, ev{ci, e})
		if e.neg < 1 && e.prelim == 0 {
			survivors = append(survivors, ev{ci, e})
		}
	}
	if len(all) == 0 {
		return fallback, ""
	}
	pick := func(evs []ev, score func(evidence) float64) int {
		best := evs[0]
		for _, x := range evs[1:] {
			if score(x.e) > score(best.e)+1e-9 {
				best = x
			}
		}
		return best.ci
	}
	var ci int
	if len(survivors) > 0 {
		ci = pick(survivors, func(e evidence) float64 { return e.pos + 0.5*e.kw })
	} else {
		ci = pick(all, func(e evidence) float64 { return -e.neg })
	}
	return d.cands[ci].text, d.cands[ci].key
}

// nearestStrategy answers with the candidate of the guessed type nearest
// the question's keywords; for numeric questions it also requires unit
// agreement and prefers the counted noun ("how many labs" -> "three labs").
func nearestStrategy(_ *Session, d *doc, q *question, _ *skill.Challenge) (string, string) {
	w := d.keyWeights(q, nil)
	if q.kind == qNumeric {
		if a, _ := d.bestNumber(q, w, false, nil); a != "" {
			return a, ""
		}
	}
	pool := typedPool(d, q)
	if len(pool) == 0 {
		return fallback, ""
	}
	best := argmax(idx(len(pool)), func(i int) float64 { return d.proximity(pool[i].tok, w) }, func(i int) int { return pool[i].tok })
	return pool[best].text, pool[best].key
}

// labelStrategy answers with a label-like word anchored on the question's
// label noun, chosen by keyword overlap with its sentence; questions that
// do not ask for a label get the keyword-overlap answer.
func labelStrategy(s *Session, d *doc, q *question, c *skill.Challenge) (string, string) {
	if q.kind != qLabel {
		return overlapStrategy(s, d, q, c)
	}
	w := d.keyWeights(q, nil)
	if a, _ := d.bestLabel(q, w, ""); a != "" {
		return a, ""
	}
	return overlapStrategy(s, d, q, c)
}

func routerStrategy(_ *Session, d *doc, q *question, _ *skill.Challenge) (string, string) {
	return route(d, q, nil, nil)
}

// statefulStrategy is the router with memory: it expands the question with
// the words that described its earlier entity answers (later parts refer
// back to them by description), adds its earlier answers as keywords in
// case the narrative names them, and favours or, when the question speaks
// of a revision, disfavours an earlier answer that reappears.
func statefulStrategy(s *Session, d *doc, q *question, _ *skill.Challenge) (string, string) {
	if len(s.rounds) == 0 {
		return route(d, q, nil, nil)
	}
	extra := map[string]float64{}
	bonus := map[string]float64{}
	revised := false
	for _, k := range q.keys {
		switch k.low {
		case "revised", "revision", "instead", "actually", "reassessed", "re-evaluated", "reevaluated", "overturned", "corrected", "contradicted", "superseded", "reversed":
			revised = true
		}
	}
	heads := q.headSet()
	var carry string // an earlier entity answer of the same head noun
	for _, r := range s.rounds {
		if r.d == nil {
			continue
		}
		for _, tok := range strings.Fields(lower(r.answer)) {
			extra[stem(tok)] = 1
		}
		if r.entKey == "" {
			continue
		}
		// Describe the earlier answer by its rarest context words.
		v := viewShared(r.d, r.q)
		ci := -1
		for _, x := range v.pool {
			if r.d.cands[x].key == r.entKey {
				ci = x
			}
		}
		if ci >= 0 {
			type sw struct {
				st  string
				idf float64
			}
			var ws []sw
			seen := map[string]bool{}
			for _, sp := range v.segs[ci] {
				for k := sp.a; k < sp.b; k++ {
					t := &r.d.toks[k]
					if !t.is(fWord) || t.is(fNum) || stopwords[t.low] || seen[t.st] || r.d.tokCand[k] == int32(ci) {
						continue
					}
					seen[t.st] = true
					ws = append(ws, sw{t.st, r.d.idf(t.st)})
				}
			}
			sort.SliceStable(ws, func(a, b int) bool { return ws[a].idf > ws[b].idf })
			for i := 0; i < len(ws) && i < 6; i++ {
				if _, ok := extra[ws[i].st]; !ok {
					extra[ws[i].st] = 0.4
				}
			}
		}
		same := false
		for _, h := range r.q.head {
			if heads[h] {
				same = true
			}
		}
		if same {
			carry = r.entKey
			if revised {
				bonus[r.entKey] -= 1.5
			} else {
				bonus[r.entKey] += 1.5
			}
		}
	}
	ans, key := route(d, q, extra, bonus)
	// The narrative does not name the earlier finding but the question
	// asks about it again: answer with the earlier answer.
	if q.kind == qEntity && q.back && carry != "" && !revised {
		named := false
		for _, c := range d.cands {
			if c.key == carry {
				named = true
			}
		}
		if !named {
			for _, r := range s.rounds {
				if r.entKey == carry {
					return r.answer, carry
				}
			}
		}
	}
	return ans, key
}

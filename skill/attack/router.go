package attack

import (
	"math"
	"strings"
)

// entityScore is the combined entity score of the routing attackers:
// affinity to the head noun, keyword overlap of the candidate's segments,
// cue polarity aligned with the question's, and a penalty for mentions in
// preliminary conclusions.
func (v *entityView) entityScore(ci int, w map[string]float64, maxAff float64) float64 {
	e := v.evidence(ci, w)
	s := 0.0
	if maxAff > 0 {
		s += 1.2 * v.aff[ci] / maxAff
	}
	s += e.kw
	s += 0.6 * float64(v.q.polarity) * (e.pos - e.neg)
	if n := len(v.d.cands[ci].ments); n > 0 {
		s -= 1.5 * float64(v.d.cands[ci].prelim) / float64(n)
	}
	return s
}

// bestEntity answers an entity question from v with the router's combined
// score and its comparison, temporal and causal refinements. bonus adds
// per-candidate-key adjustments (the stateful attacker's memory). It
// returns the candidate index (-1 if none) and its score.
func (v *entityView) bestEntity(w map[string]float64, bonus map[string]float64) (int, float64) {
	if len(v.pool) == 0 {
		return -1, math.Inf(-1)
	}
	d, q := v.d, v.q
	maxAff := 0.0
	for _, ci := range v.pool {
		maxAff = math.Max(maxAff, v.aff[ci])
	}
	scores := make(map[int]float64, len(v.pool))
	for _, ci := range v.pool {
		scores[ci] = v.entityScore(ci, w, maxAff) + bonus[d.cands[ci].key]
	}
	// Comparison: the candidate whose own number is the extreme one.
	if q.max || q.min {
		vals := map[int]float64{}
		for _, ci := range v.pool {
			best, bestS := 0.0, math.Inf(-1)
			for _, sp := range v.segs[ci] {
				for k := sp.a; k < sp.b; k++ {
					t := &d.toks[k]
					if !t.is(fNum) || t.is(fYear|fWeakNum) {
						continue
					}
					s := 0.0
					if q.unit != unitNone && t.unit == q.unit {
						s += 2
					}
					s += d.proximity(k, w)
					if s > bestS {
						best, bestS = t.num, s
					}
				}
			}
			if !math.IsInf(bestS, -1) {
				vals[ci] = best
			}
		}
		if len(vals) >= 2 {
			pick, pv := -1, 0.0
			for _, ci := range v.pool {
				x, ok := vals[ci]
				if !ok {
					continue
				}
				if pick < 0 || (q.max && !q.min && x > pv) || (q.min && !q.max && x < pv) {
					pick, pv = ci, x
				}
			}
			scores[pick] += 3
		}
	}
	// Temporal order: first or last mentioned among the leading candidates.
	if (q.first || q.last) && !(q.max || q.min) {
		top := topK(v.pool, func(ci int) float64 { return scores[ci] }, 3)
		pick := top[0]
		for _, ci := range top {
			if q.first && d.firstMention(ci) < d.firstMention(pick) {
				pick = ci
			}
			if q.last && !q.first && d.firstMention(ci) > d.firstMention(pick) {
				pick = ci
			}
		}
		scores[pick] += 0.8
	}
	// Causal: the object of "attributed to", "caused by", "due to".
	if q.causal {
		for _, ci := range v.pool {
			for _, m := range d.cands[ci].ments {
				if m.tok >= 2 {
					p1, p2 := d.toks[m.tok-1].low, d.toks[m.tok-2]
					if (p1 == "to" || p1 == "by") && (causeWords[p2.low] || p2.st == "attrib") {
						scores[ci] += 1.5
						break
					}
				}
			}
		}
	}
	best := argmax(v.pool, func(ci int) float64 { return scores[ci] }, d.firstMention)
	return best, scores[best]
}

// route answers q from d as the question-type router does: entity, numeric
// or label by the question's wording, each with its full heuristic.
func route(d *doc, q *question, extra, bonus map[string]float64) (answer, entKey string) {
	w := d.keyWeights(q, extra)
	switch q.kind {
	case qNumeric, qLabel:
		// Multi-hop: find the entity the question describes, then answer
		// from what is said about it.
		ent, segs := "", []span(nil)
		if len(q.inner) > 0 {
			qi := q.withHead(q.inner)
			v := d.view(qi)
			if ci, _ := v.bestEntity(d.keyWeights(qi, extra), bonus); ci >= 0 && len(v.pool) > 1 {
				ent, segs = d.cands[ci].key, v.segs[ci]
			}
		}
		if q.kind == qNumeric {
			if a, _ := d.bestNumber(q, w, true, segs); a != "" {
				return a, ""
			}
		} else if a, _ := d.bestLabel(q, w, ent); a != "" {
			return a, ""
		}
	}
	v := viewShared(d, q)
	ci, _ := v.bestEntity(w, bonus)
	// No candidate sits near the head noun ("Which serogroup ...") but
	// words do: answer with the word attached to the head noun.
	if q.kind == qEntity && len(q.head) > 0 && maxOf(v.aff) < 1 {
		qh := *q
		qh.labelHead = q.head[len(q.head)-1]
		if l, sc, ok := d.bestLabelFull(&qh, w, ""); ok && sc >= 3 && l.anchor == qh.labelHead && !l.before {
			t := &d.toks[l.tok]
			if maxOf(v.aff) < 0.3 || l.quoted || t.is(fIdent) || strings.ContainsAny(t.text, "0123456789") {
				return l.text, ""
			}
		}
	}
	if ci >= 0 {
		return d.cands[ci].text, d.cands[ci].key
	}
	if a, _ := d.bestNumber(q, w, true, nil); a != "" {
		return a, ""
	}
	return fallback, ""
}

func maxOf(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = math.Max(m, x)
	}
	return m
}

// fallback is the answer when a narrative offers nothing of the kind asked.
const fallback = "unknown"

package attack

import (
	"slices"
	"sync"
	"sync/atomic"
)

// The parses of a narrative (the black-box attackers' analysis, the
// white-box attackers' worlds) are pure functions of the text (and, for
// the procedural inverter, of the domain, the part and the earlier part's
// parse). The validator and the eval harness open a fresh session per
// question, attacker and context, so without sharing each narrative was
// parsed dozens of times over; parseMemo keeps the most recent parses for
// every session of the process. A parse, once memoized, is only read: the
// strategies never modify it (TestParseMemoMatchesFreshParses checks the
// answers and the parses against fresh ones).

// memoMaxText bounds the narratives memoized: larger (hostile) texts are
// parsed per session as before, so the memo's memory stays small.
const memoMaxText = 64 << 10

// memoSize is how many parses each memo keeps: a validation or an eval
// session touches a handful of narratives at a time.
const memoSize = 32

// memoOff disables the memos (the tests compare against fresh parses).
var memoOff atomic.Bool

// parseMemo is a bounded, concurrency-safe memo with first-in first-out
// eviction.
type parseMemo[K comparable, V any] struct {
	mu   sync.Mutex
	m    map[K]V
	ring [memoSize]K
	next int
}

// get returns the memoized value for k, building it (outside the lock)
// when absent.
func (m *parseMemo[K, V]) get(k K, build func() V) V {
	if memoOff.Load() {
		return build()
	}
	m.mu.Lock()
	v, ok := m.m[k]
	m.mu.Unlock()
	if ok {
		return v
	}
	v = build()
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.m[k]; ok {
		return old // built concurrently: keep one copy
	}
	if m.m == nil {
		m.m = make(map[K]V, memoSize)
	}
	if len(m.m) == memoSize { // full: every ring slot holds a key of m
		delete(m.m, m.ring[m.next])
	}
	m.ring[m.next] = k
	m.next = (m.next + 1) % memoSize
	m.m[k] = v
	return v
}

// procKey identifies a procedural inverter parse.
type procKey struct {
	text, domain string
	part         int
	prev         *pWorld
}

var (
	questionMemo parseMemo[string, *question]
	docMemo      parseMemo[string, *doc]
	llmMemo      parseMemo[string, *lWorld]
	procMemo     parseMemo[procKey, *pWorld]
	chainMemo    parseMemo[string, *chainDoc]
	numbersMemo  parseMemo[string, []wbNum]
	ruleMemo     parseMemo[docQuestion, []ruleParse]
	viewMemo     parseMemo[docQuestion, *entityView]
)

// analyseShared is analyse, memoized for narratives up to memoMaxText.
// The doc's slices are clipped, so that an append to one of them can
// never write into memory another session reads.
func analyseShared(text string) *doc {
	if len(text) > memoMaxText {
		return analyse(text)
	}
	return docMemo.get(text, func() *doc {
		d := analyse(text)
		d.toks, d.sents, d.cands = slices.Clip(d.toks), slices.Clip(d.sents), slices.Clip(d.cands)
		d.nums, d.labels = slices.Clip(d.nums), slices.Clip(d.labels)
		return d
	})
}

// parseLLMShared is parseLLM, memoized for narratives up to memoMaxText.
func parseLLMShared(text string) *lWorld {
	if len(text) > memoMaxText {
		return parseLLM(text)
	}
	return llmMemo.get(text, func() *lWorld { return parseLLM(text) })
}

// parseProceduralShared is parseProcedural with the part's vocabulary,
// memoized for narratives up to memoMaxText.
func parseProceduralShared(text, domain string, part int, prev *pWorld) *pWorld {
	if len(text) > memoMaxText {
		return parseProcedural(text, procVocab(domain, part), prev)
	}
	return procMemo.get(procKey{text, domain, part, prev}, func() *pWorld {
		return parseProcedural(text, procVocab(domain, part), prev)
	})
}

// analyseQuestionShared is analyseQuestion, memoized (a question is at
// most maxQuestionBytes): the validator asks every generic attacker each
// question in every context, and the survivor attacker asks them all
// again. The parse is only read.
func analyseQuestionShared(text string) *question {
	return questionMemo.get(text, func() *question { return analyseQuestion(text) })
}

// wbNumbersShared is wbNumbers, memoized for texts up to memoMaxText. The
// numbers, their *big.Rat values included, are only read.
func wbNumbersShared(text string) []wbNum {
	if len(text) > memoMaxText {
		return wbNumbers(text)
	}
	return numbersMemo.get(text, func() []wbNum { return slices.Clip(wbNumbers(text)) })
}

// docQuestion identifies a parse of a narrative's analysis for a question
// (both as analyseShared and analyseQuestionShared return them; others
// only miss). The key holds both, so neither address is reused while the
// entry lives.
type docQuestion struct {
	d *doc
	q *question
}

// viewShared is d.view(q), memoized for narratives up to memoMaxText: the
// generic attackers build the same entity view in every context of a
// question, and the survivor attacker asks them again. The view is only
// read.
func viewShared(d *doc, q *question) *entityView {
	if len(d.text) > memoMaxText {
		return d.view(q)
	}
	return viewMemo.get(docQuestion{d, q}, func() *entityView { return d.view(q) })
}

package secondgen

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Mutated sets: each rule of "Format" and stage 1 broken once (and a few
// edits that must stay valid), from a set that passes everything.

type obj = map[string]any

func baseSet(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "spec", "examples", "generated", "aviation_maintenance.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func generic(t *testing.T, b []byte) obj {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var o obj
	if err := d.Decode(&o); err != nil {
		t.Fatal(err)
	}
	return o
}

func part(o obj, i int) obj { return o["parts"].([]any)[i].(obj) }
func quest(o obj, p, q int) obj {
	return part(o, p)["questions"].([]any)[q].(obj)
}

func words(n int) string { return strings.TrimSpace(strings.Repeat("word ", n)) }

type mutation struct {
	name string
	edit func(o obj)
	raw  func(b []byte) []byte
}

func mutations() []mutation {
	rep := func(old, new string) func([]byte) []byte {
		return func(b []byte) []byte { return bytes.Replace(b, []byte(old), []byte(new), 1) }
	}
	return []mutation{
		// reading (raw bytes)
		{name: "trailing object", raw: func(b []byte) []byte { return append(b, []byte(" {}")...) }},
		{name: "trailing white space", raw: func(b []byte) []byte { return append(b, []byte(" \n\t")...) }},
		{name: "trailing bracket", raw: func(b []byte) []byte { return append(b, ']') }},
		{name: "trailing braces", raw: func(b []byte) []byte { return append(b, []byte(" }}")...) }},
		{name: "byte-order mark", raw: func(b []byte) []byte { return append([]byte("\ufeff"), b...) }},
		{name: "invalid UTF-8", raw: rep(`"domain": "`, "\"domain\": \"\xff")},
		{name: "lone high surrogate", raw: rep(`"domain": "`, `"domain": "\ud800`)},
		{name: "lone low surrogate", raw: rep(`"domain": "`, `"domain": "\udc00`)},
		{name: "paired surrogates", raw: rep(`"domain": "`, `"domain": "\ud83d\ude00`)},
		{name: "duplicate domain", raw: rep(`"domain": `, `"domain": "x", "domain": `)},
		{name: "duplicate answer", raw: rep(`"answer": `, `"answer": "x", "answer": `)},
		{name: "member Answer", raw: rep(`"answer": `, `"Answer": `)},
		{name: "member Domain", raw: rep(`"domain": `, `"Domain": `)},
		{name: "unknown top member", raw: rep(`"domain": `, `"foo": 1, "domain": `)},
		{name: "unknown question member", raw: rep(`"answer": `, `"foo": 1, "answer": `)},
		{name: "unknown part member", raw: rep(`"narrative": `, `"foo": 1, "narrative": `)},
		// domain
		{name: "blank domain", edit: func(o obj) { o["domain"] = " \u3000\u2028" }},
		{name: "domain 256 bytes", edit: func(o obj) { o["domain"] = strings.Repeat("d", 256) }},
		{name: "domain 257 bytes", edit: func(o obj) { o["domain"] = strings.Repeat("d", 257) }},
		{name: "domain number", edit: func(o obj) { o["domain"] = json.Number("3") }},
		{name: "domain null", edit: func(o obj) { o["domain"] = nil }},
		{name: "no domain", edit: func(o obj) { delete(o, "domain") }},
		// parts
		{name: "two parts", edit: func(o obj) { o["parts"] = o["parts"].([]any)[:2] }},
		{name: "four parts", edit: func(o obj) { p := o["parts"].([]any); o["parts"] = append(p, p[2]) }},
		{name: "parts null", edit: func(o obj) { o["parts"] = nil }},
		{name: "blank narrative", edit: func(o obj) { part(o, 1)["narrative"] = "\u00a0\n" }},
		{name: "narrative 32769 bytes", edit: func(o obj) { part(o, 0)["narrative"] = strings.Repeat("x", 32769) }},
		{name: "no questions", edit: func(o obj) { part(o, 0)["questions"] = []any{} }},
		{name: "questions null", edit: func(o obj) { part(o, 0)["questions"] = nil }},
		{name: "nine questions", edit: func(o obj) {
			p := part(o, 0)
			qs := p["questions"].([]any)
			for len(qs) < 9 {
				c := obj{}
				for k, v := range qs[0].(obj) {
					c[k] = v
				}
				c["question"] = "Which one, case " + strings.Repeat("i", len(qs)) + "?"
				qs = append(qs, c)
			}
			p["questions"] = qs
		}},
		// question
		{name: "blank question", edit: func(o obj) { quest(o, 0, 0)["question"] = "  " }},
		{name: "question 2049 bytes", edit: func(o obj) { quest(o, 0, 0)["question"] = strings.Repeat("q", 2049) }},
		{name: "question 2048 bytes", edit: func(o obj) { quest(o, 0, 0)["question"] = strings.Repeat("q", 2048) }},
		// answers
		{name: "blank answer", edit: func(o obj) { quest(o, 0, 0)["answer"] = " " }},
		{name: "answer 21 chars", edit: func(o obj) {
			q := quest(o, 0, 0)
			q["answer"] = strings.Repeat("é", 21)
			q["answers"] = []any{strings.Repeat("é", 21)}
		}},
		{name: "answer 20 chars in 40 bytes, padded", edit: func(o obj) {
			q := quest(o, 0, 0)
			q["answer"] = " " + strings.Repeat("é", 20) + "\u3000"
			q["answers"] = []any{strings.Repeat("é", 20)}
		}},
		{name: "answer 20 chars decomposed", edit: func(o obj) {
			q := quest(o, 0, 0)
			q["answer"] = strings.Repeat("e\u0301", 10)
			q["answers"] = []any{strings.Repeat("é", 10)}
		}},
		{name: "answers empty", edit: func(o obj) { quest(o, 0, 0)["answers"] = []any{} }},
		{name: "answers null", edit: func(o obj) { quest(o, 0, 0)["answers"] = nil }},
		{name: "answers absent", edit: func(o obj) { delete(quest(o, 0, 0), "answers") }},
		{name: "nine answers", edit: func(o obj) {
			q := quest(o, 0, 0)
			a := []any{q["answer"]}
			for i := 0; len(a) < 9; i++ {
				a = append(a, "alt"+strings.Repeat("x", i))
			}
			q["answers"] = a
		}},
		{name: "blank variant", edit: func(o obj) { q := quest(o, 0, 0); q["answers"] = append(q["answers"].([]any), " ") }},
		{name: "variant 65 bytes", edit: func(o obj) {
			q := quest(o, 0, 0)
			q["answers"] = append(q["answers"].([]any), strings.Repeat("v", 65))
		}},
		{name: "variant 64 bytes padded", edit: func(o obj) {
			q := quest(o, 0, 0)
			q["answers"] = append(q["answers"].([]any), " "+strings.Repeat("v", 64)+" ")
		}},
		{name: "canonical not a variant", edit: func(o obj) { quest(o, 0, 0)["answers"] = []any{"something else"} }},
		{name: "canonical a variant by norm only", edit: func(o obj) {
			q := quest(o, 0, 0)
			q["answers"] = []any{strings.ToLower(q["answer"].(string)) + " "}
		}},
		{name: "canonical padded", edit: func(o obj) {
			q := quest(o, 0, 0)
			q["answer"] = "  " + q["answer"].(string) + "\n"
		}},
		{name: "canonical second", edit: func(o obj) {
			q := quest(o, 0, 0)
			q["answers"] = []any{"zzz other", q["answer"]}
		}},
		{name: "answer number", edit: func(o obj) { quest(o, 0, 0)["answer"] = json.Number("4") }},
		// types
		{name: "no reasoning_type", edit: func(o obj) { delete(quest(o, 0, 0), "reasoning_type") }},
		{name: "bad reasoning_type", edit: func(o obj) { quest(o, 0, 0)["reasoning_type"] = "Negation" }},
		{name: "no answer_type", edit: func(o obj) { delete(quest(o, 0, 0), "answer_type") }},
		{name: "bad answer_type", edit: func(o obj) { quest(o, 0, 0)["answer_type"] = "date" }},
		// distractors
		{name: "33 distractors", edit: func(o obj) {
			var d []any
			for i := 0; i < 33; i++ {
				d = append(d, "rival "+strings.Repeat("r", i))
			}
			quest(o, 0, 0)["distractors"] = d
		}},
		{name: "blank distractor", edit: func(o obj) { quest(o, 0, 0)["distractors"] = []any{"\t"} }},
		{name: "distractor 65 bytes", edit: func(o obj) { quest(o, 0, 0)["distractors"] = []any{strings.Repeat("r", 65)} }},
		{name: "distractor is the answer by norm", edit: func(o obj) {
			q := quest(o, 0, 0)
			q["distractors"] = []any{" " + strings.ToUpper(q["answer"].(string))}
		}},
		{name: "distractor is a variant", edit: func(o obj) {
			q := quest(o, 0, 0)
			v := q["answers"].([]any)
			q["distractors"] = []any{v[len(v)-1]}
		}},
		{name: "distractor is the canonical, variants elsewhere", edit: func(o obj) {
			q := quest(o, 0, 0)
			q["answers"] = []any{}
			q["distractors"] = []any{q["answer"]}
		}},
		// provenance, kind, id
		{name: "provenance bogus source", edit: func(o obj) { o["provenance"] = obj{"source": "human"} }},
		{name: "provenance model 129 bytes", edit: func(o obj) { o["provenance"] = obj{"source": "llm", "model": strings.Repeat("m", 129)} }},
		{name: "provenance model 128 bytes", edit: func(o obj) { o["provenance"] = obj{"source": "llm", "model": strings.Repeat("m", 128)} }},
		{name: "provenance empty", edit: func(o obj) { o["provenance"] = obj{} }},
		{name: "provenance null", edit: func(o obj) { o["provenance"] = nil }},
		{name: "provenance unknown member", edit: func(o obj) { o["provenance"] = obj{"source": "llm", "seed": 1} }},
		{name: "llm_questions string", edit: func(o obj) { o["provenance"] = obj{"source": "llm", "llm_questions": "yes"} }},
		{name: "kind narrative", edit: func(o obj) { o["kind"] = "narrative" }},
		{name: "kind rebus", edit: func(o obj) { o["kind"] = "rebus" }},
		{name: "kind empty", edit: func(o obj) { o["kind"] = "" }},
		{name: "id any", edit: func(o obj) { o["id"] = "not-the-content-id" }},
		// depends_on
		{name: "depends_on 0", edit: func(o obj) { quest(o, 0, 0)["depends_on"] = []any{json.Number("0")} }},
		{name: "depends_on later part", edit: func(o obj) { quest(o, 0, 0)["depends_on"] = []any{json.Number("3")} }},
		{name: "depends_on negative", edit: func(o obj) { quest(o, 1, 0)["depends_on"] = []any{json.Number("-1")} }},
		{name: "depends_on fraction", edit: func(o obj) { quest(o, 1, 0)["depends_on"] = []any{json.Number("1.5")} }},
		{name: "depends_on 1.0", edit: func(o obj) { quest(o, 1, 0)["depends_on"] = []any{json.Number("1.0")} }},
		{name: "depends_on string", edit: func(o obj) { quest(o, 1, 0)["depends_on"] = []any{"1"} }},
		{name: "depends_on 99", edit: func(o obj) { quest(o, 1, 0)["depends_on"] = []any{json.Number("99")} }},
		{name: "depends_on huge", edit: func(o obj) { quest(o, 1, 0)["depends_on"] = []any{json.Number("99999999999999999999")} }},
		{name: "part 2 depends on nothing", edit: func(o obj) {
			for _, q := range part(o, 1)["questions"].([]any) {
				q.(obj)["depends_on"] = []any{}
			}
		}},
		{name: "part 3 depends only on itself", edit: func(o obj) {
			for _, q := range part(o, 2)["questions"].([]any) {
				q.(obj)["depends_on"] = []any{json.Number("3")}
			}
		}},
		// null members
		{name: "kind null", edit: func(o obj) { o["kind"] = nil }},
		{name: "id null", edit: func(o obj) { o["id"] = nil }},
		{name: "narrative null", edit: func(o obj) { part(o, 0)["narrative"] = nil }},
		{name: "question null", edit: func(o obj) { quest(o, 0, 0)["question"] = nil }},
		{name: "answer null", edit: func(o obj) { quest(o, 0, 0)["answer"] = nil }},
		{name: "reasoning_type null", edit: func(o obj) { quest(o, 0, 0)["reasoning_type"] = nil }},
		{name: "answer_type null", edit: func(o obj) { quest(o, 0, 0)["answer_type"] = nil }},
		{name: "depends_on null", edit: func(o obj) { quest(o, 0, 0)["depends_on"] = nil }},
		{name: "distractors null", edit: func(o obj) { quest(o, 0, 0)["distractors"] = nil }},
		{name: "source null", edit: func(o obj) { o["provenance"] = obj{"source": nil, "model": nil, "llm_questions": nil} }},
		{name: "answers holds null", edit: func(o obj) { q := quest(o, 0, 0); q["answers"] = append(q["answers"].([]any), nil) }},
		{name: "part null", edit: func(o obj) { o["parts"].([]any)[1] = nil }},
		{name: "question entry null", edit: func(o obj) { p := part(o, 0); p["questions"] = append(p["questions"].([]any), nil) }},
		// stage 1
		{name: "narrative 279 tokens", edit: func(o obj) { part(o, 0)["narrative"] = words(209) }},
		{name: "narrative 280 tokens", edit: func(o obj) { part(o, 0)["narrative"] = words(210) }},
		{name: "narrative 1320 tokens", edit: func(o obj) { part(o, 0)["narrative"] = words(990) }},
		{name: "narrative 1321 tokens", edit: func(o obj) { part(o, 0)["narrative"] = words(991) }},
		{name: "narrative 280 tokens, ZWSP joined", edit: func(o obj) { part(o, 0)["narrative"] = words(209) + " a\u200bb" }},
		{name: "narrative 280 tokens, NBSP split", edit: func(o obj) { part(o, 0)["narrative"] = words(209) + "\u00a0b" }},
		{name: "two questions in a part", edit: func(o obj) { p := part(o, 0); p["questions"] = p["questions"].([]any)[:2] }},
		{name: "numeric answer without digit", edit: func(o obj) {
			for _, q := range part(o, 0)["questions"].([]any) {
				if q.(obj)["answer_type"] == "numeric" {
					q.(obj)["answer"] = "many"
					q.(obj)["answers"] = []any{"many"}
				}
			}
		}},
		{name: "numeric answer with Arabic-Indic digit", edit: func(o obj) {
			for _, q := range part(o, 0)["questions"].([]any) {
				if q.(obj)["answer_type"] == "numeric" {
					q.(obj)["answer"] = "٣ days"
					q.(obj)["answers"] = []any{"٣ days"}
				}
			}
		}},
		{name: "numeric answer with superscript two", edit: func(o obj) {
			for _, q := range part(o, 0)["questions"].([]any) {
				if q.(obj)["answer_type"] == "numeric" {
					q.(obj)["answer"] = "x²"
					q.(obj)["answers"] = []any{"x²"}
				}
			}
		}},
		{name: "every answer entity in part 1", edit: func(o obj) {
			for _, q := range part(o, 0)["questions"].([]any) {
				q.(obj)["answer_type"] = "entity"
			}
		}},
		{name: "reasoning type twice in a part", edit: func(o obj) {
			qs := part(o, 0)["questions"].([]any)
			qs[1].(obj)["reasoning_type"] = qs[0].(obj)["reasoning_type"]
		}},
		{name: "three reasoning types", edit: func(o obj) {
			for p := 0; p < 3; p++ {
				for i, q := range part(o, p)["questions"].([]any) {
					q.(obj)["reasoning_type"] = []string{"negation", "comparison", "temporal"}[i%3]
				}
			}
		}},
		{name: "question twice, other spacing and case", edit: func(o obj) {
			q := quest(o, 0, 0)["question"].(string)
			quest(o, 2, 0)["question"] = " " + strings.ReplaceAll(strings.ToUpper(q), " ", " \u00a0\n")
		}},
		{name: "question twice, ZWSP inside", edit: func(o obj) {
			q := quest(o, 0, 0)["question"].(string)
			quest(o, 2, 0)["question"] = strings.Replace(q, " ", "\u200b ", 1)
		}},
	}
}

func TestDiffMutations(t *testing.T) {
	base := baseSet(t)
	var tl tally
	compare(t, "base", base, &tl)
	if tl.fmtRej+tl.freshRej+tl.recheckRej != 0 {
		t.Fatal("the base set does not pass")
	}
	for _, m := range mutations() {
		var b []byte
		if m.raw != nil {
			b = m.raw(base)
			if bytes.Equal(b, base) {
				t.Fatalf("%s: no change", m.name)
			}
		} else {
			o := generic(t, base)
			m.edit(o)
			var err error
			if b, err = json.Marshal(o); err != nil {
				t.Fatal(err)
			}
		}
		compare(t, m.name, b, &tl)
		a := mine(b)
		t.Logf("%-45s format=%v fresh=%v recheck=%v", m.name, a.format == nil, a.fresh == nil && a.format == nil, a.recheck == nil && a.format == nil)
	}
	t.Logf("mutations: %+v", tl)
}

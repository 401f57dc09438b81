package generate_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/attack"
	"github.com/acaptcha/acaptcha/skill/generate"
)

func validator(t *testing.T, cfg generate.ValidatorConfig) *generate.Validator {
	t.Helper()
	if cfg.Policy == nil {
		p := skill.DefaultPolicy()
		cfg.Policy = &p
	}
	v, err := generate.NewValidator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func fresh(t *testing.T, v *generate.Validator, s *skill.Set) *generate.Report {
	t.Helper()
	rep, err := v.Run(context.Background(), s, generate.Mode{Fresh: true})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// Each structural rule rejects a set that breaks it, with the structure
// reason and a detail naming the problem.
func TestStructureRules(t *testing.T) {
	v := validator(t, generate.ValidatorConfig{})
	if rep := fresh(t, v, goodSet(t)); !rep.Accepted() {
		t.Fatalf("good set rejected: %s: %s", rep.Reason, rep.Detail)
	}
	for _, tc := range []struct {
		name   string
		edit   func(s *skill.Set)
		detail string
	}{
		{"two parts", func(s *skill.Set) { s.Parts = s.Parts[:2] }, "2 parts"},
		{"short narrative", func(s *skill.Set) { s.Parts[1].Narrative = strings.Repeat("word ", 150) }, "narrative of 200 tokens"},
		{"long narrative", func(s *skill.Set) { s.Parts[0].Narrative = strings.Repeat("word ", 1100) }, "narrative of 1467 tokens"},
		{"too few questions", func(s *skill.Set) { s.Parts[2].Questions = s.Parts[2].Questions[:2] }, "2 questions, want 3"},
		{"variants without canonical first", func(s *skill.Set) {
			q := &s.Parts[0].Questions[0]
			q.Answers = []string{"FXC", "EI-FXC"}
		}, "is not the canonical answer"},
		{"no answers array", func(s *skill.Set) { s.Parts[0].Questions[0].Answers = nil }, "no answers array"},
		{"long answer", func(s *skill.Set) {
			q := &s.Parts[0].Questions[2]
			q.Answer, q.Answers = "category Delta of the fleet", []string{"category Delta of the fleet"}
		}, "characters"},
		{"numeric without digits", func(s *skill.Set) {
			q := &s.Parts[1].Questions[1]
			q.Answer, q.Answers = "six", []string{"six", "6"}
		}, "has no digits"},
		{"missing answer type", func(s *skill.Set) { s.Parts[0].Questions[1].AnswerType = "" }, "answer_type"},
		{"reasoning type twice", func(s *skill.Set) { s.Parts[0].Questions[1].ReasoningType = skill.Negation }, "used twice"},
		{"no label answer", func(s *skill.Set) { s.Parts[1].Questions[2].AnswerType = skill.EntityAnswer }, "no label answer"},
		{"no chain", func(s *skill.Set) {
			for i := range s.Parts[1].Questions {
				s.Parts[1].Questions[i].DependsOn = nil
			}
		}, "part 2: no question depends"},
		{"duplicate question", func(s *skill.Set) { s.Parts[2].Questions[1].Question = s.Parts[0].Questions[1].Question }, "duplicate question"},
		// generation.md stage 1: compared after NFC, case folding and
		// collapsing white space (runs of White_Space characters).
		{"duplicate question with other white space", func(s *skill.Set) {
			s.Parts[2].Questions[1].Question = " " + strings.ReplaceAll(strings.ToUpper(s.Parts[0].Questions[1].Question), " ", "\u00a0 \t")
		}, "duplicate question"},
		{"few reasoning types", func(s *skill.Set) {
			types := []skill.ReasoningType{skill.Negation, skill.Comparison, skill.Temporal}
			for pi := range s.Parts {
				for qi := range s.Parts[pi].Questions {
					s.Parts[pi].Questions[qi].ReasoningType = types[qi]
				}
			}
		}, "3 reasoning types"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := clone(t, goodSet(t))
			tc.edit(s)
			rep := fresh(t, v, s)
			if rep.Reason != generate.RejectStructure || !strings.Contains(rep.Detail, tc.detail) {
				t.Errorf("reason %q detail %q, want structure with %q", rep.Reason, rep.Detail, tc.detail)
			}
		})
	}
}

// A validated set has lost questions; it still validates as a served set,
// not as raw generator output.
func TestServedSetRules(t *testing.T) {
	v := validator(t, generate.ValidatorConfig{})
	rep := v.Offline(context.Background(), goodSet(t))
	if !rep.Accepted() || len(rep.Drops) == 0 {
		t.Fatalf("good set: %s %s, %d drops", rep.Reason, rep.Detail, len(rep.Drops))
	}
	again := v.Offline(context.Background(), rep.Set)
	if !again.Accepted() || len(again.Drops) != 0 || again.Set.ID != rep.Set.ID {
		t.Errorf("re-validation: %s %s, drops %+v", again.Reason, again.Detail, again.Drops)
	}
	if r := fresh(t, v, rep.Set); r.Reason != generate.RejectStructure {
		t.Errorf("pruned set passed the fresh rules: %s", r.Reason)
	}
}

func TestPolicyRule(t *testing.T) {
	pol := skill.DefaultPolicy()
	v := validator(t, generate.ValidatorConfig{Params: generate.Params{MinTokens: 100}, Policy: &pol})
	s := clone(t, goodSet(t))
	s.Parts[0].Narrative = strings.Join(strings.Fields(s.Parts[0].Narrative)[:160], " ")
	if rep := fresh(t, v, s); rep.Reason != generate.RejectPolicy {
		t.Errorf("reason %q (%s), want policy", rep.Reason, rep.Detail)
	}
}

func TestLeakageRules(t *testing.T) {
	v := validator(t, generate.ValidatorConfig{})
	appendTo := func(s *skill.Set, part int, text string) { s.Parts[part].Narrative += "\n\n" + text }
	for _, tc := range []struct {
		name string
		edit func(s *skill.Set)
		want generate.Reason
	}{
		{"verdict word", func(s *skill.Set) { appendTo(s, 0, "The desk confirmed the ranking.") }, generate.RejectLeakage},
		{"ruled out", func(s *skill.Set) { appendTo(s, 2, "Age was ruled out as a driver.") }, generate.RejectLeakage},
		{"back reference", func(s *skill.Set) {
			appendTo(s, 2, "The aircraft previously singled out, EI-FXC, stays grounded.")
		}, generate.RejectLeakage},
		{"variant with back reference", func(s *skill.Set) {
			appendTo(s, 1, "As noted in the handover, FXC flew again on 9 May.")
		}, generate.RejectLeakage},
		{"mention among rivals", func(s *skill.Set) {
			appendTo(s, 2, "Spares were ordered for EI-FXA, EI-FXC and EI-FXE.")
		}, ""},
		{"later question names answer", func(s *skill.Set) {
			s.Parts[1].Questions[0].Question = "What is the serial number of the valve taken off EI-FXC?"
		}, generate.RejectLeakage},
		{"trivial number", func(s *skill.Set) { appendTo(s, 2, "The earlier review lasted 18 minutes.") }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := clone(t, goodSet(t))
			tc.edit(s)
			if rep := v.Offline(context.Background(), s); rep.Reason != tc.want {
				t.Errorf("reason %q (%s), want %q", rep.Reason, rep.Detail, tc.want)
			}
		})
	}
	// Strict leakage rejects any mention: even the example's part 3, whose
	// campaign rule lists both of part 2's possible findings.
	strict := validator(t, generate.ValidatorConfig{StrictLeakage: true})
	if rep := strict.Offline(context.Background(), goodSet(t)); rep.Reason != generate.RejectLeakage || !strings.Contains(rep.Detail, "functional failure") {
		t.Errorf("strict: %s %s", rep.Reason, rep.Detail)
	}
}

func TestAnswerInQuestion(t *testing.T) {
	v := validator(t, generate.ValidatorConfig{})
	s := clone(t, goodSet(t))
	s.Parts[1].Questions[0].Question = "Was the valve from the aircraft with the recurring caution BV-5502, BV-5518 or BV-5527?"
	rep := v.Offline(context.Background(), s)
	if !rep.Accepted() {
		t.Fatalf("%s: %s", rep.Reason, rep.Detail)
	}
	found := false
	for _, d := range rep.Drops {
		if d.Part == 2 && d.Question == 1 && d.Reason == generate.DropAnswerInQuestion {
			found = true
		}
	}
	if !found {
		t.Errorf("no answer_in_question drop: %+v", rep.Drops)
	}
	for i := range s.Parts[0].Questions {
		q := &s.Parts[0].Questions[i]
		q.Question += " (" + q.Answers[len(q.Answers)-1] + "?)"
	}
	if rep := v.Offline(context.Background(), s); rep.Reason != generate.RejectLeakage {
		t.Errorf("part without questions: %s %s", rep.Reason, rep.Detail)
	}
}

// recorder is an attacker that remembers the rounds each of its sessions
// saw and answers one chosen question correctly.
type recorder struct {
	mu       sync.Mutex
	sessions [][]int // rounds seen, per session
	knows    string  // question text it answers
	answer   string
}

func (r *recorder) NewSession() skill.Answerer {
	r.mu.Lock()
	r.sessions = append(r.sessions, nil)
	i := len(r.sessions) - 1
	r.mu.Unlock()
	return skill.AnswerFunc(func(_ context.Context, c skill.Challenge) (string, error) {
		r.mu.Lock()
		r.sessions[i] = append(r.sessions[i], c.Round)
		r.mu.Unlock()
		if c.Question == r.knows {
			return r.answer, nil
		}
		return "unknown", nil
	})
}

// Script resistance runs every attacker on every question, the stateful
// ones after every combination of earlier rounds, and drops a question an
// attacker answers.
func TestScriptStage(t *testing.T) {
	s := goodSet(t)
	target := s.Parts[1].Questions[2]
	stateful := &recorder{knows: target.Question, answer: target.Answers[1]}
	plain := &recorder{}
	v := validator(t, generate.ValidatorConfig{
		Attackers: []attack.Named{{Name: "memory", Prover: stateful}, {Name: "plain", Prover: plain}},
		Stateful:  []string{"memory"},
		WhiteBox:  generate.WhiteBoxOff,
	})
	rep := v.Offline(context.Background(), s)
	if !rep.Accepted() {
		t.Fatalf("%s: %s", rep.Reason, rep.Detail)
	}
	if len(rep.Drops) != 1 || rep.Drops[0].Part != 2 || rep.Drops[0].Question != 3 || rep.Drops[0].By != "memory" || rep.Drops[0].Key() != "script:memory" {
		t.Fatalf("drops %+v", rep.Drops)
	}
	// The plain attacker: one session per question, reaching its round.
	if len(plain.sessions) != 9 {
		t.Errorf("plain attacker ran %d sessions, want 9", len(plain.sessions))
	}
	// The stateful one: 3 sessions for part 1; 3 per question of part 2,
	// except the one it answers in its first context (a hit ends the
	// search); 3x2 per question of part 3, whose contexts no longer
	// include the dropped question. Each runs the earlier rounds in order.
	if want := 3 + (3 + 3 + 1) + 3*6; len(stateful.sessions) != want {
		t.Errorf("stateful attacker ran %d sessions, want %d", len(stateful.sessions), want)
	}
	for _, rounds := range append(plain.sessions, stateful.sessions...) {
		for i, r := range rounds {
			if r != i+1 && len(rounds) > 1 {
				t.Fatalf("session saw rounds %v", rounds)
			}
		}
	}
	for _, q := range rep.Questions {
		if len(q.Scripts) != 2 {
			t.Errorf("question %d.%d: %d attacker answers", q.Part, q.Question, len(q.Scripts))
		}
	}
}

// The default battery is the whole attack registry plus the white-box
// attackers of the set's source: a set without provenance is attacked as
// LLM-written text, a procedural one without its inverter unless asked.
func TestDefaultAttackers(t *testing.T) {
	t.Parallel() // CPU-bound under -race: lets the package use both cores
	names := func(ns []attack.Named) []string {
		var out []string
		for _, n := range ns {
			out = append(out, n.Name)
		}
		return out
	}
	procedural := clone(t, goodSet(t))
	procedural.Provenance = &skill.Provenance{Source: skill.SourceProcedural}
	hybrid := clone(t, goodSet(t))
	hybrid.Provenance = &skill.Provenance{Source: skill.SourceHybrid}
	for _, c := range []struct {
		name string
		cfg  generate.ValidatorConfig
		set  *skill.Set
		want []string
	}{
		{"no-provenance", generate.ValidatorConfig{}, goodSet(t), append(attack.Names(), names(attack.WhiteBox(skill.SourceLLM))...)},
		{"hybrid", generate.ValidatorConfig{}, hybrid, append(attack.Names(), names(attack.WhiteBox(skill.SourceHybrid))...)},
		{"procedural", generate.ValidatorConfig{}, procedural, attack.Names()},
		{"procedural-always", generate.ValidatorConfig{WhiteBox: generate.WhiteBoxAlways}, procedural, append(attack.Names(), names(attack.WhiteBox(skill.SourceProcedural))...)},
		{"kind-override", generate.ValidatorConfig{WhiteBoxKind: skill.SourceHybrid}, goodSet(t), append(attack.Names(), names(attack.WhiteBox(skill.SourceHybrid))...)},
		{"off", generate.ValidatorConfig{WhiteBox: generate.WhiteBoxOff}, hybrid, attack.Names()},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := validator(t, c.cfg)
			kind := skill.SourceUnknown
			if c.set.Provenance != nil {
				kind = c.set.Provenance.Source
			}
			if got := v.ScriptAttackers(kind); fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("ScriptAttackers(%q) = %v, want %v", kind, got, c.want)
			}
			rep := v.Offline(context.Background(), c.set)
			for _, q := range rep.Questions {
				if q.Dropped == generate.DropAnswerInQuestion {
					continue
				}
				var got []string
				for _, a := range q.Scripts {
					got = append(got, a.Attacker)
				}
				if len(got) == 0 {
					continue // not reached: its part was rejected first
				}
				want := c.want
				if q.Dropped == generate.DropScript {
					// The survivor runs only on what every other
					// attacker failed (generation.md stage 3).
					want = slices.DeleteFunc(slices.Clone(want), func(n string) bool { return n == attack.WhiteBoxSurvivor })
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("question %d.%d (dropped %q) ran %v, want %v", q.Part, q.Question, q.Dropped, got, want)
				}
			}
		})
	}
	if _, err := generate.NewValidator(generate.ValidatorConfig{WhiteBox: "sometimes"}); err == nil {
		t.Error("unknown white-box mode accepted")
	}
	for in, want := range map[string]generate.WhiteBoxMode{"": generate.WhiteBoxAuto, "auto": generate.WhiteBoxAuto, " Off ": generate.WhiteBoxOff, "always": generate.WhiteBoxAlways} {
		if got, err := generate.ParseWhiteBoxMode(in); err != nil || got != want {
			t.Errorf("ParseWhiteBoxMode(%q) = %q, %v", in, got, err)
		}
	}
}

// The rule attackers drop a label question whose answer is the first case
// its stated rule lists, and leave it when the rule states its cases in an
// order that does not put the answer first (what the prompt asks for).
func TestRuleAttackersDropAnswerListedFirst(t *testing.T) {
	t.Parallel()
	byName := func(n string) attack.Named {
		a, ok := attack.ByName(n)
		if !ok {
			t.Fatalf("no attacker %s", n)
		}
		return a
	}
	cfg := generate.ValidatorConfig{
		Attackers: []attack.Named{byName(attack.RuleClause), byName(attack.RuleListFirst)},
		WhiteBox:  generate.WhiteBoxOff,
	}
	const first = "a defect that recurs at two or more stations is filed in category Delta; one that recurs at a single station goes to Bravo; a single occurrence or one with an external explanation is filed as Echo."
	const ordered = "a single occurrence or one with an external explanation is filed as Echo; one that recurs at a single station goes to Bravo; a defect that recurs at two or more stations is filed in category Delta."
	s := goodSet(t)
	if !strings.Contains(s.Parts[0].Narrative, first) || s.Parts[0].Questions[2].Answer != "Delta" {
		t.Fatal("the example's triage rule changed: update this test")
	}
	rep := validator(t, cfg).Offline(context.Background(), s)
	dropped := func(rep *generate.Report) []generate.Drop {
		var out []generate.Drop
		for _, d := range rep.Drops {
			if d.Part == 1 && d.Question == 3 {
				out = append(out, d)
			}
		}
		return out
	}
	if d := dropped(rep); len(d) != 1 || d[0].By != attack.RuleClause {
		t.Errorf("answer listed first: drops %+v, want one by %s", rep.Drops, attack.RuleClause)
	}
	c := clone(t, s)
	c.Parts[0].Narrative = strings.Replace(c.Parts[0].Narrative, first, ordered, 1)
	rep = validator(t, cfg).Offline(context.Background(), c)
	if !rep.Accepted() || len(dropped(rep)) != 0 {
		t.Errorf("answer listed last: %s %s, drops %+v", rep.Reason, rep.Detail, rep.Drops)
	}
}

// A script's answer counts as answering a numeric question when its one
// number alone does: "Stage 6" for a count of 6 is refused by the
// matcher's number-label guard, but a script author who reads the guard
// drops the label, so the question is dropped as if "6" had been answered.
func TestScriptStageJudgesTheNumberAlone(t *testing.T) {
	s := clone(t, goodSet(t))
	s.Parts[1].Narrative += " Stage 1 of the review closed the file."
	target := s.Parts[1].Questions[1]
	if target.Answer != "6" {
		t.Fatal("the example's count question changed: update this test")
	}
	if skill.Judge(&target, "Stage 6", []string{s.Parts[0].Narrative, s.Parts[1].Narrative}) {
		t.Fatal("the matcher accepts a labelled number: this test tests nothing")
	}
	labeller := &recorder{knows: target.Question, answer: "Stage 6"}
	v := validator(t, generate.ValidatorConfig{
		Attackers: []attack.Named{{Name: "labeller", Prover: labeller}},
		WhiteBox:  generate.WhiteBoxOff,
	})
	rep := v.Offline(context.Background(), s)
	if !rep.Accepted() {
		t.Fatalf("%s: %s", rep.Reason, rep.Detail)
	}
	if len(rep.Drops) != 1 || rep.Drops[0].Part != 2 || rep.Drops[0].Question != 2 || rep.Drops[0].By != "labeller" {
		t.Fatalf("drops %+v, want question 2.2 by labeller", rep.Drops)
	}
}

package eval

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/attack"
)

// Headline is one summary figure of a run: the session pass rate of a
// class, or of the best class of a group.
type Headline struct {
	Label string `json:"label"`
	// Class is the class the figure is of; empty when the group did not
	// run.
	Class string `json:"class,omitempty"`
	Pass  Rate   `json:"pass"`
}

// Headline labels.
const (
	HeadBestGeneric  = "best generic"
	HeadBestWhiteBox = "best white-box"
	HeadListing      = "candidate list"
	HeadBestScript   = "best script (any)"
	HeadOracle       = "oracle"
	HeadAgentStyle   = "agent-style"
)

// Headline returns the summary figure with the given label.
func (r *Report) Headline(label string) (Headline, bool) {
	for _, h := range r.Headlines {
		if h.Label == label {
			return h, true
		}
	}
	return Headline{}, false
}

// better orders classes by pass rate, then by passes, then by how far
// they got (rounds passed over all sessions), then by name.
func better(a, b Class) bool {
	if a.Pass.Value != b.Pass.Value {
		return a.Pass.Value > b.Pass.Value
	}
	if a.Pass.K != b.Pass.K {
		return a.Pass.K > b.Pass.K
	}
	if ra, rb := roundsPassed(a), roundsPassed(b); ra != rb {
		return ra > rb
	}
	return a.Name < b.Name
}

func roundsPassed(c Class) int {
	n := 0
	for _, r := range c.Rounds {
		n += r.Passed
	}
	return n
}

func best(cs []Class, keep func(Class) bool) (Class, bool) {
	var out Class
	found := false
	for _, c := range cs {
		if keep(c) && (!found || better(c, out)) {
			out, found = c, true
		}
	}
	return out, found
}

func headlines(cs []Class) []Headline {
	var out []Headline
	group := func(label string, keep func(Class) bool) {
		h := Headline{Label: label}
		if c, ok := best(cs, keep); ok {
			h.Class, h.Pass = c.Name, c.Pass
		}
		out = append(out, h)
	}
	inGroup := func(g string) func(Class) bool { return func(c Class) bool { return c.Group == g } }
	group(HeadBestGeneric, inGroup(GroupGeneric))
	group(HeadBestWhiteBox, inGroup(GroupWhiteBox))
	group(HeadListing, inGroup(GroupListing))
	group(HeadBestScript, func(c Class) bool { return c.Kind == KindAttacker })
	for _, c := range cs {
		switch {
		case c.Group == GroupReference:
			out = append(out, Headline{Label: c.Name, Class: c.Name, Pass: c.Pass})
		case c.Kind == KindAgent:
			out = append(out, Headline{Label: "agent " + c.Name, Class: c.Name, Pass: c.Pass})
		}
	}
	return out
}

// Validation is what the validation filter did to a source's sets before
// they were served. The command that builds the source fills it in with
// Record and attaches it to the report.
type Validation struct {
	// Filter says which checks ran.
	Filter string `json:"filter"`
	// Why says why the filter ran (or was asked for).
	Why           string `json:"why,omitempty"`
	SetsIn        int    `json:"sets_in"`
	SetsKept      int    `json:"sets_kept"`
	QuestionsIn   int    `json:"questions_in"`
	QuestionsKept int    `json:"questions_kept"`
	// MinKeptPerPart is the fewest questions any part of a kept set
	// still serves (-1 when no set was kept).
	MinKeptPerPart int `json:"min_kept_per_part"`
	// DropsBy counts dropped questions by reason ("script:router").
	DropsBy map[string]int `json:"drops_by,omitempty"`
	// Rejected counts rejected sets by reason.
	Rejected map[string]int `json:"rejected,omitempty"`
	// Attackers names the script attackers the filter ran (a question any
	// of them answered was dropped), RandomSeed the seed of its random
	// attacker. On the questions kept they fail by construction: only
	// attackers outside the list, or the random attacker with another
	// seed, measure what a script does to the served sets.
	Attackers  []string `json:"attackers,omitempty"`
	RandomSeed uint64   `json:"random_seed,omitempty"`
	// Sets lists the first MaxValidationSets sets validated.
	Sets    []ValidatedSet `json:"sets,omitempty"`
	Seconds float64        `json:"seconds"`
}

// MaxValidationSets caps Validation.Sets.
const MaxValidationSets = 100

// ValidatedSet is the validation record of one set.
type ValidatedSet struct {
	Name        string `json:"name"`
	Domain      string `json:"domain,omitempty"`
	InPerPart   []int  `json:"in_per_part"`
	KeptPerPart []int  `json:"kept_per_part,omitempty"`
	// Reason and Detail tell why the set was rejected ("" if kept).
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// NewValidation returns an empty record.
func NewValidation(filter, why string) *Validation {
	return &Validation{Filter: filter, Why: why, MinKeptPerPart: -1, DropsBy: map[string]int{}, Rejected: map[string]int{}}
}

// Record adds one validated set: in is the set as drawn, kept what the
// filter left of it (nil when rejected, with reason and detail), drops
// the keys of the questions it dropped. It is not safe for concurrent
// use.
func (v *Validation) Record(name string, in, kept *skill.Set, reason, detail string, drops []string) {
	if v == nil || in == nil {
		return
	}
	vs := ValidatedSet{Name: name, Domain: in.Domain, Reason: reason, Detail: detail}
	for _, p := range in.Parts {
		vs.InPerPart = append(vs.InPerPart, len(p.Questions))
		v.QuestionsIn += len(p.Questions)
	}
	v.SetsIn++
	for _, d := range drops {
		v.DropsBy[d]++
	}
	if kept != nil {
		v.SetsKept++
		for _, p := range kept.Parts {
			n := len(p.Questions)
			vs.KeptPerPart = append(vs.KeptPerPart, n)
			v.QuestionsKept += n
			if v.MinKeptPerPart < 0 || n < v.MinKeptPerPart {
				v.MinKeptPerPart = n
			}
		}
	} else {
		if reason == "" {
			reason = "rejected"
		}
		v.Rejected[reason]++
	}
	if len(v.Sets) < MaxValidationSets {
		v.Sets = append(v.Sets, vs)
	}
}

// AgentStyleReport judges, with skill.Judge, every form of the agent-style
// brain on every question of the distinct sets a run drew, each with the
// narratives up to its own part: what the matcher accepts of an agent's
// wording, form by form.
type AgentStyleReport struct {
	Sets      int `json:"sets"`
	Questions int `json:"questions"`
	// Forms counts every applicable form; Picked only the form the brain
	// gives for each question.
	Forms  map[string]FormStat `json:"forms"`
	Picked map[string]FormStat `json:"picked"`
	// Rejected lists up to MaxRejectedForms rejected wordings.
	Rejected []RejectedForm `json:"rejected,omitempty"`
}

// FormStat counts judged and accepted wordings.
type FormStat struct {
	Judged   int     `json:"judged"`
	Accepted int     `json:"accepted"`
	Rate     float64 `json:"rate"`
}

// RejectedForm is one wording of a right answer the matcher rejected.
type RejectedForm struct {
	Set      string `json:"set"`
	Part     int    `json:"part"`
	Question string `json:"question"`
	Answer   string `json:"answer"`
	Form     string `json:"form"`
	Text     string `json:"text"`
}

// Bounds of the agent-style probe.
const (
	MaxRejectedForms = 20
	maxProbeSets     = 2000
)

func addForm(m map[string]FormStat, form string, ok bool) {
	f := m[form]
	f.Judged++
	if ok {
		f.Accepted++
	}
	f.Rate = float64(f.Accepted) / float64(f.Judged)
	m[form] = f
}

// probeAgentStyle judges the agent-style forms on sets (distinct by ID).
func probeAgentStyle(sets []*skill.Set, seed uint64) *AgentStyleReport {
	r := &AgentStyleReport{Forms: map[string]FormStat{}, Picked: map[string]FormStat{}}
	seen := map[string]bool{}
	for _, s := range sets {
		if s == nil || r.Sets >= maxProbeSets {
			continue
		}
		id := s.ID
		if id == "" {
			id = s.ContentID()
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		r.Sets++
		var shown []string
		for pi := range s.Parts {
			shown = append(shown, s.Parts[pi].Narrative)
			for qi := range s.Parts[pi].Questions {
				q := &s.Parts[pi].Questions[qi]
				r.Questions++
				for _, f := range AgentStyleForms(q, shown) {
					ok := skill.Judge(q, f.Text, shown)
					addForm(r.Forms, f.Form, ok)
					if !ok && len(r.Rejected) < MaxRejectedForms {
						r.Rejected = append(r.Rejected, RejectedForm{Set: id, Part: pi + 1, Question: q.Question,
							Answer: q.Answer, Form: f.Form, Text: f.Text})
					}
				}
				pick := AgentStyleAnswer(q, shown, seed)
				addForm(r.Picked, pick.Form, skill.Judge(q, pick.Text, shown))
			}
		}
	}
	return r
}

// pct2 prints a small proportion with two decimals.
func pct2(x float64) string { return fmt.Sprintf("%.2f%%", 100*x) }

func rateCell(r Rate) string {
	if r.N == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%d/%d = %s [%s, %s]", r.K, r.N, pct2(r.Value), pct2(r.Low), pct2(r.High))
}

// bestOf reports whether a headline is the best class of a group.
func bestOf(label string) bool {
	return label == HeadBestGeneric || label == HeadBestWhiteBox || label == HeadBestScript
}

// writeSummary writes the headline figures, the validation filter and the
// agent-style probe.
func (r *Report) writeSummary(ew *errWriter) error {
	if len(r.Headlines) > 0 {
		ew.printf("\nsummary: session pass rate, 95%% Wilson interval\n")
		tw := tabwriter.NewWriter(ew, 2, 8, 2, ' ', 0)
		for _, h := range r.Headlines {
			if h.Class == "" {
				fmt.Fprintf(tw, "  %s\t-\tnot run\n", h.Label)
				continue
			}
			class := h.Class
			if h.Pass.K == 0 && bestOf(h.Label) {
				// Every class of the group scored 0: the one named got
				// furthest (rounds passed), it is no "best" attacker.
				class = "none passed (furthest: " + h.Class + ")"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", h.Label, class, rateCell(h.Pass))
		}
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
	}
	if v := r.Validation; v != nil {
		ew.printf("\nvalidation filter (%s): %d of %d sets kept, %d of %d questions kept", v.Filter, v.SetsKept, v.SetsIn, v.QuestionsKept, v.QuestionsIn)
		if v.MinKeptPerPart >= 0 {
			ew.printf(", every part of a kept set serves at least %d", v.MinKeptPerPart)
		}
		ew.printf(" (%.1fs)\n", v.Seconds)
		if v.Why != "" {
			ew.printf("  %s\n", v.Why)
		}
		if len(v.Attackers) > 0 {
			ew.printf("  filter attackers (each fails the kept questions by construction): %s\n", filterNames(v, r.AttackSeed))
		}
		if len(v.DropsBy) > 0 {
			ew.printf("  questions dropped by: %s\n", topCounts(v.DropsBy, 12))
		}
		if len(v.Rejected) > 0 {
			ew.printf("  sets rejected: %s\n", topCounts(v.Rejected, 12))
		}
		if len(v.Sets) <= 30 {
			for _, s := range v.Sets {
				if s.Reason != "" {
					ew.printf("  %s: REJECTED %s: %s\n", s.Name, s.Reason, s.Detail)
					continue
				}
				ew.printf("  %s: kept per part %s of %s\n", s.Name, joinInts(s.KeptPerPart), joinInts(s.InPerPart))
			}
		}
	}
	if a := r.AgentStyle; a != nil && a.Questions > 0 {
		ew.printf("\nagent-style wordings judged on every question of %d distinct sets (%d questions)\n", a.Sets, a.Questions)
		tw := tabwriter.NewWriter(ew, 2, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  FORM\tACCEPTED (ALL FORMS)\tACCEPTED (AS PICKED)")
		for _, f := range AgentForms {
			all, pick := a.Forms[f], a.Picked[f]
			if all.Judged == 0 {
				continue
			}
			fmt.Fprintf(tw, "  %s\t%d/%d (%s)\t%s\n", f, all.Accepted, all.Judged, pct(all.Rate), formCell(pick))
		}
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
		for _, x := range a.Rejected[:min(len(a.Rejected), 8)] {
			ew.printf("  rejected %s %q for %q (part %d: %s)\n", x.Form, x.Text, x.Answer, x.Part, clipText(x.Question, 90))
		}
	}
	return ew.err
}

// filterNames lists a filter's attackers, the random attacker with its
// seed and, when the run's random attacker has another seed, a mark that
// the run's one is held out.
func filterNames(v *Validation, runSeed uint64) string {
	names := make([]string, len(v.Attackers))
	for i, n := range v.Attackers {
		names[i] = n
		if n == attack.Random && v.RandomSeed != 0 {
			names[i] = fmt.Sprintf("%s (seed %d", n, v.RandomSeed)
			if runSeed != 0 && runSeed != v.RandomSeed {
				names[i] += fmt.Sprintf("; this run's has seed %d, held out", runSeed)
			}
			names[i] += ")"
		}
	}
	return strings.Join(names, ", ")
}

func formCell(f FormStat) string {
	if f.Judged == 0 {
		return "-"
	}
	return fmt.Sprintf("%d/%d (%s)", f.Accepted, f.Judged, pct(f.Rate))
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, "/")
}

func clipText(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

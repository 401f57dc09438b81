package attack

import (
	"context"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
)

// ruleAnswer runs the named attacker through a session: the narratives
// before the last are earlier rounds (answered with their own question),
// the last is the round asked.
func ruleAnswer(t *testing.T, name, question string, narratives ...string) string {
	t.Helper()
	a, ok := ByName(name)
	if !ok {
		t.Fatalf("no attacker %s", name)
	}
	s := a.Prover.NewSession()
	var ans string
	for i, n := range narratives {
		q := "Which item does the text describe?"
		if i == len(narratives)-1 {
			q = question
		}
		var err error
		ans, err = s.Answer(context.Background(), skill.Challenge{Round: i + 1, Rounds: len(narratives), Narrative: n, Question: q})
		if err != nil {
			t.Fatal(err)
		}
	}
	return ans
}

// Synthetic narratives: a filler paragraph of neutral prose around one
// stated rule, in the forms writers use.
const ruleFiller = "The review covered four sites over the spring. Staff at each site logged their readings twice a day " +
	"and sent them to the central office, where a clerk checked the totals against the paper sheets. "

func TestRuleAttackersAnswerTheFirstStatedCase(t *testing.T) {
	for _, c := range []struct {
		name, narrative, question string
		answers                   []string // accepted: the first case the rule states
		clause, list              bool     // which attacker must answer it
	}{
		{
			name: "verb, semicolons",
			narrative: ruleFiller + "For the annual notice the standing rule applies: take the valid exceedances at the gauge; " +
				"more than 24 gives red status, 19 to 24 gives amber, and 18 or fewer gives green.\n\n" + ruleFiller,
			question: "Under the office's standing rule, which status does the gauge's count earn?",
			answers:  []string{"red", "red status"}, clause: true, list: true,
		},
		{
			name: "elliptical clauses",
			narrative: ruleFiller + "A deviation is critical when it is systematic and changed a reported conclusion; " +
				"major when systematic without such an effect; minor when isolated.\n\n" + ruleFiller,
			question: "What grade does the procedure give that site's deviation?",
			answers:  []string{"critical", "critical finding"}, clause: true, list: true,
		},
		{
			name: "participle and as",
			narrative: ruleFiller + "A vendor paid just under the approval limit in four of six months is reported as a control failure; " +
				"in one to three months, as monitor; otherwise, no exception.",
			question: "What result does that vendor get under the split-invoice test?",
			answers:  []string{"control failure"}, clause: true, list: true,
		},
		{
			name: "quoted labels after a lead-in",
			narrative: ruleFiller + "Closing codes for late tickets are \"carrier fault\" where the cause lies with the carrier, " +
				"\"external\" where a storm delayed every carrier alike, and \"shipper fault\" where our papers were wrong.",
			question: "Under which closing code should that container's ticket be resolved?",
			answers:  []string{"carrier fault"}, clause: true, list: true,
		},
		{
			name: "condition before the label verb",
			narrative: ruleFiller + "Network QC rule: a station whose timing error is under 0.1 s is \"Tier A\"; " +
				"from 0.1 s to under 0.5 s it is \"Tier B\"; at 0.5 s or more it is \"Tier C\".",
			question: "Under the network's QC rule, which tier do that station's picks receive?",
			answers:  []string{"Tier A"}, clause: true, list: true,
		},
		{
			name: "enumeration after a colon",
			narrative: ruleFiller + "Every exceedance also gets a cause code on the form: product, sampling or laboratory, " +
				"and only a product cause counts toward the trend chart.",
			question: "Which cause code belongs on the form for the first exceedance?",
			answers:  []string{"product", "product cause"}, clause: true, list: true, // no verb label: the first label
		},
		{
			name: "one case per sentence",
			narrative: ruleFiller + "\n\nA lot at or above 85% on retest is released. A lot between 75% and 85% is downgraded. " +
				"Below 75% the lot is withdrawn.\n\n" + ruleFiller,
			question: "What certification status does that lot receive under the laboratory's rules?",
			answers:  []string{"released"}, clause: true, list: true,
		},
		{
			name: "list lines",
			narrative: ruleFiller + "\n\nEscalation ladder:\n- Watch: more than 3 alarms in a week\n- Alert: more than 10 alarms in a week\n" +
				"- Shutdown: more than 25 alarms in a week\n\n" + ruleFiller,
			question: "Which rung of the escalation ladder does the pump reach?",
			answers:  []string{"Watch"}, clause: true, list: true,
		},
		{
			name: "transcript speakers are not a list",
			narrative: "BRAND: For the record, read the playbook rule you applied.\n" +
				"HOLT: beaconing seen by only one sensor is Priority 3 when nothing else corroborates it; " +
				"beaconing corroborated by a second sensor is Priority 2; corroborated beaconing with stolen credentials is Priority 1.\n" +
				"BRAND: And where did the incident stand?",
			question: "What priority does the playbook assign the incident?",
			answers:  []string{"Priority 3", "P3"}, clause: true, list: true,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := &skill.Question{Question: c.question, Answer: c.answers[0], Answers: c.answers}
			for _, a := range []struct {
				name string
				want bool
			}{{RuleClause, c.clause}, {RuleListFirst, c.list}} {
				got := ruleAnswer(t, a.name, c.question, c.narrative)
				if ok := skill.Judge(q, got, []string{c.narrative}); ok != a.want {
					t.Errorf("%s answered %q: correct %v, want %v", a.name, got, ok, a.want)
				}
			}
		})
	}
}

// A label made of the question's own words names the case, not a label:
// "classes a node by ..." is skipped for the first quoted label.
func TestRuleLabelIsNotTheQuestionsWords(t *testing.T) {
	n := ruleFiller + "Guideline LP-4 classes a node by the share of units that went missing: at least 1% on every consignment " +
		"is \"systemic\"; losses on one consignment only are \"isolated\"; anything else is \"intermittent\"."
	for _, name := range []string{RuleClause, RuleListFirst} {
		if got := ruleAnswer(t, name, "Under the guideline, what class does that node receive?", n); got != "systemic" {
			t.Errorf("%s answered %q, want systemic", name, got)
		}
	}
}

// The two attackers differ when a rule lists labels before its first
// verb label.
func TestRuleClauseVersusListFirst(t *testing.T) {
	n := ruleFiller + "Outcomes: \"advice\", \"warning\" or \"notice\"; a lapse under 1 point gives advice; " +
		"a lapse above 3 points gives notice; anything between gives warning."
	q := "Which outcome does the operator face under the compliance ladder?"
	if got := ruleAnswer(t, RuleListFirst, q, n); got != "advice" {
		t.Errorf("rule-list-first answered %q, want the first listed label", got)
	}
	if got := ruleAnswer(t, RuleClause, q, n); got != "advice" {
		t.Errorf("rule-clause answered %q, want the first verb label", got)
	}
	n2 := ruleFiller + "Outcomes, in the ladder's words: \"notice\", \"warning\" or \"advice\"; a lapse under 1 point gives advice; " +
		"a lapse above 3 points gives notice; anything between gives warning."
	if got := ruleAnswer(t, RuleListFirst, q, n2); got != "notice" {
		t.Errorf("rule-list-first answered %q, want notice", got)
	}
	if got := ruleAnswer(t, RuleClause, q, n2); got != "advice" {
		t.Errorf("rule-clause answered %q, want advice", got)
	}
}

// A rule stated in an earlier part is read when a later part's question
// applies it and the later narrative states none.
func TestRuleFromAnEarlierPart(t *testing.T) {
	p1 := ruleFiller + "Playbook rule IR-4: beaconing seen by only one sensor is Priority 3; beaconing corroborated by a second " +
		"sensor is Priority 2; corroborated beaconing with stolen credentials is Priority 1."
	p2 := ruleFiller + "On Tuesday the second sensor saw the same beacon from the build host, and the credentials were found on a file server."
	q := "Under the playbook rule, what priority should the incident now carry?"
	for _, name := range []string{RuleClause, RuleListFirst} {
		if got := ruleAnswer(t, name, q, p1, p2); got != "Priority 3" {
			t.Errorf("%s answered %q, want the first case of part 1's rule", name, got)
		}
		if got := ruleAnswer(t, name, q, p2); got != fallback {
			t.Errorf("%s answered %q without any rule, want %q", name, got, fallback)
		}
	}
}

// A narrative without a stated rule gets the fallback, and hostile input
// stays bounded and valid.
func TestRuleAttackersNoRule(t *testing.T) {
	for _, name := range []string{RuleClause, RuleListFirst} {
		if got := ruleAnswer(t, name, "Which status does the lot receive?", ruleFiller+ruleFiller); got != fallback {
			t.Errorf("%s answered %q on a narrative without a rule", name, got)
		}
		for _, n := range []string{"", ":", "\"", "is \"", ";;;;", "- a: when\n- b: when\n- a: when", "is is is is is"} {
			got := ruleAnswer(t, name, "Which status?", n)
			if got == "" || len(got) > skill.MaxAnswerBytes {
				t.Errorf("%s answered %q to %q", name, got, n)
			}
		}
	}
}

func FuzzRuleAttackers(f *testing.F) {
	f.Add("A lot above 85% is \"released\"; between 75% and 85% it is \"downgraded\"; otherwise \"withdrawn\".", "Which status?")
	f.Add("- Red: more than 24\n- Amber: 19 to 24\n- Green: 18 or fewer", "Which colour does the gauge earn?")
	f.Add("Codes: a, b or c; x is y when z.", "Which code?")
	f.Fuzz(func(t *testing.T, narrative, question string) {
		for _, name := range []string{RuleClause, RuleListFirst} {
			a, _ := ByName(name)
			got, err := a.Prover.NewSession().Answer(context.Background(), skill.Challenge{Round: 1, Rounds: 3, Narrative: narrative, Question: question})
			if err != nil || got == "" || len(got) > skill.MaxAnswerBytes {
				t.Fatalf("%s: %q, %v", name, got, err)
			}
		}
	})
}

// The generation prompt puts a part's label answer in the middle or at
// the end of its rule's cases, never first: the rule-list attackers that
// answer with the second, the one before the last and the last label read
// those places, so the validator drops a question whose rule they parse.
func TestRuleListAttackersReadTheLaterCases(t *testing.T) {
	n := ruleFiller + "Network QC rule: a station whose timing error is under 0.1 s is \"accepted\"; from 0.1 s to under 0.5 s " +
		"its picks are \"downweighted\"; at 0.5 s or more they are \"rejected\".\n\n" + ruleFiller
	q := "Under the network's QC rule, what status do that station's picks receive?"
	for name, want := range map[string]string{RuleListFirst: "accepted", RuleListSecond: "downweighted",
		RuleListPenult: "downweighted", RuleListLast: "rejected"} {
		if got := ruleAnswer(t, name, q, n); got != want {
			t.Errorf("%s answered %q, want %q", name, got, want)
		}
	}
	n4 := ruleFiller + "Alert scheme: a score under 2 gives Level 0; 2 to 4 gives Level 1; 5 to 7 gives Level 2; " +
		"8 or more gives Level 3.\n\n" + ruleFiller
	q4 := "Under the alert scheme, which level applies to the event?"
	for name, want := range map[string]string{RuleListSecond: "Level 1", RuleListPenult: "Level 2", RuleListLast: "Level 3"} {
		if got := ruleAnswer(t, name, q4, n4); got != want {
			t.Errorf("four cases: %s answered %q, want %q", name, got, want)
		}
	}
	// A rule of two cases has no middle: only its last is read.
	n2 := ruleFiller + "A lot under 5% moisture is \"accepted\"; any other lot is \"rejected\".\n\n" + ruleFiller
	q2 := "Under the rule, what status does that lot receive?"
	for name, want := range map[string]string{RuleListSecond: fallback, RuleListPenult: fallback, RuleListLast: "rejected"} {
		if got := ruleAnswer(t, name, q2, n2); got != want {
			t.Errorf("two cases: %s answered %q, want %q", name, got, want)
		}
	}
}

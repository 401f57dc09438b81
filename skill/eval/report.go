package eval

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/acaptcha/acaptcha/skill"
)

// ReportVersion is the version of the Report JSON layout.
const ReportVersion = 2

// Report is the outcome of an evaluation run. All times are in seconds.
type Report struct {
	Version    int    `json:"version"`
	Source     string `json:"source"`
	SourceKind string `json:"source_kind,omitempty"`
	Sessions   int    `json:"sessions"`
	Seed       uint64 `json:"seed"`
	// AttackSeed is the random attacker's seed (Config.AttackSeed).
	AttackSeed uint64     `json:"attack_seed,omitempty"`
	Policy     PolicyInfo `json:"policy"`
	Corpus     CorpusInfo `json:"corpus"`
	Classes    []Class    `json:"classes"`
	// Headlines are the figures that sum a run up: the best attacker of
	// each group, the reference brains, configured agents.
	Headlines []Headline `json:"summary"`
	// Validation is what the validation filter did to the sets before
	// they were served (nil when it did not run).
	Validation *Validation `json:"validation,omitempty"`
	// AgentStyle judges every form of the agent-style brain on every
	// question of the distinct sets drawn (nil without reference brains).
	AgentStyle     *AgentStyleReport `json:"agent_style,omitempty"`
	Human          HumanReport       `json:"human"`
	Sweep          Sweep             `json:"sweep"`
	Window         Window            `json:"window"`
	NoAgent        string            `json:"no_agent,omitempty"`
	Notes          []string          `json:"notes,omitempty"`
	ElapsedSeconds float64           `json:"elapsed_seconds"`
}

// PolicyInfo is the verifier policy of the run.
type PolicyInfo struct {
	Rounds           int     `json:"rounds"`
	Tau              float64 `json:"tau"`
	DeriveTau        bool    `json:"derive_tau"`
	Alpha            float64 `json:"alpha,omitempty"`
	Total            float64 `json:"total"`
	RTTCredit        float64 `json:"rtt_credit"`
	MaxHumanFraction float64 `json:"max_human_fraction"`
}

// CorpusInfo describes the sets the run drew.
type CorpusInfo struct {
	Drawn      int     `json:"drawn"`
	Distinct   int     `json:"distinct"`
	Cycled     bool    `json:"cycled"`
	Skipped    int     `json:"skipped"`
	SkipReason string  `json:"skip_reason,omitempty"`
	MinTokens  int     `json:"min_tokens"`
	MaxTokens  int     `json:"max_tokens"`
	MeanTokens float64 `json:"mean_tokens"`
}

// Class is the result of one prover class.
type Class struct {
	Name        string `json:"name"`
	Kind        string `json:"kind"`
	Group       string `json:"group"`
	Description string `json:"description,omitempty"`
	Sessions    int    `json:"sessions"`
	// Pass is the per-session acceptance rate.
	Pass Rate `json:"pass"`
	// Rounds[i] counts the sessions that reached and passed round i+1; its
	// Rate is over all sessions, Conditional over those that reached it.
	Rounds []RoundStat `json:"rounds"`
	// Effective summarises the effective time of every answered round.
	Effective Summary `json:"effective"`
	// SessionMax summarises, over sessions that answered every round
	// correctly, the slowest round's effective time.
	SessionMax Summary `json:"session_max"`
	// Failures counts rejected sessions by verdict reason.
	Failures map[string]int `json:"failures"`
	// FailuresByReasoning counts rejected sessions by the reasoning type of
	// the question of the round that failed.
	FailuresByReasoning map[string]int `json:"failures_by_reasoning"`
	// Errors counts the sessions that ended on an error rather than a
	// judgement (protocol_error, declined, inconclusive) by the verdict's
	// detail, cut at 200 bytes: an unreachable LLM shows here as its
	// network error, not as a measured 0 %.
	Errors map[string]int `json:"errors,omitempty"`
	// ByReasoning and ByAnswerType are answered-round accuracy by the
	// question's reasoning and answer type: how close a class came on each.
	ByReasoning  map[string]TypeStat `json:"by_reasoning"`
	ByAnswerType map[string]TypeStat `json:"by_answer_type"`
	// ByDomain is the session pass rate per domain.
	ByDomain map[string]Rate `json:"by_domain"`
	// EffectiveSample holds answered-round effective times for the timing
	// plot: up to 2000 of an agent class, up to 300 of any other.
	EffectiveSample []float64 `json:"effective_sample,omitempty"`
}

// RoundStat is the pass count of one round.
type RoundStat struct {
	Round       int     `json:"round"`
	Reached     int     `json:"reached"`
	Passed      int     `json:"passed"`
	Rate        Rate    `json:"rate"`
	Conditional float64 `json:"conditional"`
}

// TypeStat is answered-round accuracy for one question type.
type TypeStat struct {
	Answered int     `json:"answered"`
	Correct  int     `json:"correct"`
	Accuracy float64 `json:"accuracy"`
}

// HumanReport is the human Monte Carlo (§6.3).
type HumanReport struct {
	Model HumanMC `json:"model"`
	// LowerBound is Eq. 6 (skill.DefaultHumanModel) at the mean narrative
	// length of the model's range; LowerBoundCorpus at the corpus mean.
	LowerBound       float64 `json:"lower_bound"`
	LowerBoundTokens int     `json:"lower_bound_tokens"`
	LowerBoundCorpus float64 `json:"lower_bound_corpus"`
	// Round and Session summarise the per-round samples and the per-session
	// slowest rounds.
	Round   Summary `json:"round"`
	Session Summary `json:"session"`
	// ModelMin is the analytic fastest round of the model.
	ModelMin float64 `json:"model_min"`
	// RoundAtTau and SessionAtTau are the completion probabilities at the
	// policy's tau (fixed-tau policies; 0 otherwise), with their upper 95%
	// bound (rule of three when no sample completed).
	RoundAtTau        float64 `json:"round_at_tau"`
	RoundAtTauUpper   float64 `json:"round_at_tau_upper"`
	SessionAtTau      float64 `json:"session_at_tau"`
	SessionAtTauUpper float64 `json:"session_at_tau_upper"`
	// Sample holds the first 500 per-round samples (the paper's N) for
	// plots.
	Sample []float64 `json:"sample"`
}

// Sweep is the threshold sensitivity analysis (§6.4) on a log grid of tau.
type Sweep struct {
	Tau []float64 `json:"tau"`
	// Agents maps an agent class to the fraction of its sessions answered
	// correctly in every round with the slowest round's effective time at
	// most tau. Sessions cut off by the run's own budget count as failures
	// at every tau (their time is censored).
	Agents       map[string][]float64 `json:"agents,omitempty"`
	HumanRound   []float64            `json:"human_round"`
	HumanSession []float64            `json:"human_session"`
	// HumanRoundLB is the conservative per-round curve of the Eq. 6
	// lower-bound reader (the policy's human model) over L ~ U(LMin, LMax).
	HumanRoundLB []float64 `json:"human_round_lb"`
}

// Window is the feasible tau window: every agent passes at least 95% of
// sessions and a human completes a round with probability at most 5%.
type Window struct {
	AgentTarget float64 `json:"agent_target"`
	HumanLimit  float64 `json:"human_limit"`
	// HumanMax is the largest tau (the 5th percentile of the per-round
	// human samples) with human completion at most HumanLimit.
	HumanMax float64 `json:"human_max"`
	// HumanMaxLB is the same edge under the conservative lower-bound
	// reader (Sweep.HumanRoundLB); operators wanting margin use it.
	HumanMaxLB float64 `json:"human_max_lb"`
	// LowerKnown is false when no agent is configured; AgentMin is then 0.
	LowerKnown bool `json:"lower_known"`
	// AgentMin is the smallest tau with every agent at or above
	// AgentTarget (the target quantile of the slowest agent's session max),
	// 0 when an agent never reaches it.
	AgentMin float64 `json:"agent_min"`
	// Exists reports whether AgentMin <= HumanMax (when the lower edge is
	// known); Decades is log10(HumanMax/AgentMin).
	Exists  bool    `json:"exists"`
	Decades float64 `json:"decades"`
}

const (
	maxTimeSample      = 2000
	maxOtherTimeSample = 300
)

// NoAgentNote is the report's note when no agent is configured.
const NoAgentNote = "no LLM agent was configured: agent completeness, the agent curve of the threshold sweep and the " +
	"lower edge of the feasible tau window were not measured. Only the script attackers and the human model ran; " +
	"configure an agent to measure completeness."

func buildReport(cfg Config, classes []class, results [][]sessionResult, st *sourceStats) *Report {
	p := cfg.Policy
	r := &Report{
		Version:    ReportVersion,
		Source:     cfg.Source.Name(),
		Sessions:   cfg.Sessions,
		Seed:       cfg.Seed,
		AttackSeed: cfg.AttackSeed,
		SourceKind: string(cfg.SourceKind),
		Policy: PolicyInfo{Rounds: p.Rounds, DeriveTau: p.DeriveTau, Total: p.Total.Seconds(),
			RTTCredit: p.RTTCredit.Seconds(), MaxHumanFraction: p.MaxHumanFraction},
		Corpus: CorpusInfo{Drawn: st.drawn, Distinct: len(st.distinct), Cycled: st.cycled, Skipped: st.skipped,
			SkipReason: st.firstErr, MinTokens: max(st.minTok, 0), MaxTokens: st.maxTok},
	}
	if p.DeriveTau {
		r.Policy.Alpha = p.Alpha
	} else {
		r.Policy.Tau = p.Tau.Seconds()
	}
	if st.nTok > 0 {
		r.Corpus.MeanTokens = float64(st.sumTok) / float64(st.nTok)
	}
	if st.cycled {
		r.Notes = append(r.Notes, fmt.Sprintf("the source ran out after %d sets; sets were reused cyclically (question picks still vary per session)", st.drawn))
	}
	if st.skipped > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d session indices skipped for invalid sets (%s)", st.skipped, st.firstErr))
	}

	agents, refs := 0, false
	for ci, c := range classes {
		cr := classReport(c, results[ci], p.Rounds)
		cr.Group = c.group
		r.Classes = append(r.Classes, cr)
		if c.kind == KindAgent {
			agents++
		}
		refs = refs || c.reference == refAgentStyle
	}
	r.Headlines = headlines(r.Classes)
	if refs {
		r.AgentStyle = probeAgentStyle(st.retained, cfg.Seed)
	}
	r.Human = humanReport(cfg, r.Corpus.MeanTokens)
	r.Sweep, r.Window = sweep(cfg, classes, results)
	if agents == 0 {
		r.NoAgent = NoAgentNote
	}
	return r
}

func classReport(c class, rs []sessionResult, rounds int) Class {
	out := Class{Name: c.name, Kind: c.kind, Description: c.desc,
		Failures: map[string]int{}, FailuresByReasoning: map[string]int{},
		ByReasoning: map[string]TypeStat{}, ByAnswerType: map[string]TypeStat{}, ByDomain: map[string]Rate{}}
	reached := make([]int, rounds)
	passed := make([]int, rounds)
	var eff, smax []float64
	accepted := 0
	domK, domN := map[string]int{}, map[string]int{}
	for _, s := range rs {
		if !s.ran {
			continue
		}
		out.Sessions++
		domN[s.domain]++
		if s.accepted {
			accepted++
			domK[s.domain]++
		} else {
			out.Failures[string(s.reason)]++
			if s.errDetail != "" {
				if out.Errors == nil {
					out.Errors = map[string]int{}
				}
				out.Errors[s.errDetail]++
			}
			if n := len(s.rounds); n > 0 {
				out.FailuresByReasoning[string(s.rounds[n-1].reasoning)]++
			}
		}
		allCorrect := len(s.rounds) == rounds
		worst := 0.0
		for i, rr := range s.rounds {
			if i < rounds {
				reached[i]++
				if rr.answered && rr.correct && (i < len(s.rounds)-1 || s.accepted) {
					passed[i]++
				}
			}
			if !rr.answered {
				allCorrect = false
				continue
			}
			eff = append(eff, rr.effective)
			worst = math.Max(worst, rr.effective)
			if !rr.correct {
				allCorrect = false
			}
			addType(out.ByReasoning, string(rr.reasoning), rr.correct)
			addType(out.ByAnswerType, string(rr.answer), rr.correct)
		}
		if allCorrect {
			smax = append(smax, worst)
		}
	}
	out.Pass = Wilson(accepted, out.Sessions)
	for i := 0; i < rounds; i++ {
		rs := RoundStat{Round: i + 1, Reached: reached[i], Passed: passed[i], Rate: Wilson(passed[i], out.Sessions)}
		if reached[i] > 0 {
			rs.Conditional = float64(passed[i]) / float64(reached[i])
		}
		out.Rounds = append(out.Rounds, rs)
	}
	out.Effective = summarize(eff)
	out.SessionMax = summarize(smax)
	switch {
	case len(eff) == 0:
	case c.kind == KindAgent:
		out.EffectiveSample = eff[:min(len(eff), maxTimeSample)]
	case c.kind != KindHuman:
		out.EffectiveSample = eff[:min(len(eff), maxOtherTimeSample)]
	}
	for d, n := range domN {
		out.ByDomain[d] = Wilson(domK[d], n)
	}
	return out
}

func addType(m map[string]TypeStat, key string, correct bool) {
	if key == "" {
		key = "unknown"
	}
	t := m[key]
	t.Answered++
	if correct {
		t.Correct++
	}
	t.Accuracy = float64(t.Correct) / float64(t.Answered)
	m[key] = t
}

func humanReport(cfg Config, corpusMean float64) HumanReport {
	m := cfg.Human
	round := cfg.Human.Simulate(cfg.HumanSamples, cfg.Seed)
	sess := cfg.Human.SimulateSessions(cfg.HumanSamples, cfg.Policy.Rounds, cfg.Seed)
	lbTokens := int(math.Round((m.LMin + m.LMax) / 2))
	if m.LMin == 352 && m.LMax == 1124 {
		lbTokens = 682 // the paper's corpus mean (its lengths are not uniform)
	}
	h := HumanReport{Model: m, LowerBoundTokens: lbTokens,
		LowerBound: skill.DefaultHumanModel().LowerBound(lbTokens).Seconds(),
		Round:      summarize(round), Session: summarize(sess), ModelMin: m.MinRoundTime()}
	if corpusMean > 0 {
		h.LowerBoundCorpus = skill.DefaultHumanModel().LowerBound(int(math.Round(corpusMean))).Seconds()
	}
	if !cfg.Policy.DeriveTau {
		tau := cfg.Policy.Tau.Seconds()
		rs, ss := sortedCopy(round), sortedCopy(sess)
		h.RoundAtTau = fractionAtMost(rs, tau)
		h.SessionAtTau = fractionAtMost(ss, tau)
		h.RoundAtTauUpper = upper95(h.RoundAtTau, len(rs))
		h.SessionAtTauUpper = upper95(h.SessionAtTau, len(ss))
	}
	h.Sample = round[:min(len(round), 500)]
	return h
}

// upper95 is the upper end of the 95% Wilson interval of p over n samples
// (about 3/n when p is 0: the rule of three).
func upper95(p float64, n int) float64 {
	return Wilson(int(math.Round(p*float64(n))), n).High
}

func sweep(cfg Config, classes []class, results [][]sessionResult) (Sweep, Window) {
	grid := LogGrid(SweepMin, SweepMax, cfg.SweepPoints)
	round := sortedCopy(cfg.Human.Simulate(cfg.HumanSamples, cfg.Seed))
	sess := sortedCopy(cfg.Human.SimulateSessions(cfg.HumanSamples, cfg.Policy.Rounds, cfg.Seed))
	sw := Sweep{Tau: grid}
	w := Window{AgentTarget: 0.95, HumanLimit: 0.05, HumanMax: quantile(round, 0.05),
		HumanMaxLB: cfg.Human.LowerBoundQuantile(cfg.Policy.Human, 0.05)}
	for _, t := range grid {
		sw.HumanRound = append(sw.HumanRound, fractionAtMost(round, t))
		sw.HumanSession = append(sw.HumanSession, fractionAtMost(sess, t))
		sw.HumanRoundLB = append(sw.HumanRoundLB, cfg.Human.LowerBoundCompletion(cfg.Policy.Human, t))
	}
	agentMin := 0.0
	reachable := true
	for ci, c := range classes {
		if c.kind != KindAgent {
			continue
		}
		if sw.Agents == nil {
			sw.Agents = map[string][]float64{}
		}
		// Per session: the slowest round if every round was answered
		// correctly, else +Inf (fails at every tau).
		var maxes []float64
		for _, s := range results[ci] {
			if !s.ran {
				continue
			}
			m := math.Inf(1)
			if len(s.rounds) == cfg.Policy.Rounds && (s.accepted || s.reason == skill.ReasonTimeout || s.reason == skill.ReasonTotalTimeout) {
				m = 0
				for _, rr := range s.rounds {
					if !rr.answered || !rr.correct {
						m = math.Inf(1)
						break
					}
					m = math.Max(m, rr.effective)
				}
			}
			maxes = append(maxes, m)
		}
		sort.Float64s(maxes)
		curve := make([]float64, len(grid))
		for i, t := range grid {
			curve[i] = fractionAtMost(maxes, t)
		}
		sw.Agents[c.name] = curve
		q := quantile(maxes, w.AgentTarget)
		if len(maxes) == 0 || math.IsInf(q, 1) {
			reachable = false
		} else {
			// The smallest tau at which at least 95% of sessions pass: the
			// ceil(0.95 n)-th smallest session max.
			k := int(math.Ceil(w.AgentTarget*float64(len(maxes)))) - 1
			agentMin = math.Max(agentMin, maxes[max(k, 0)])
		}
	}
	if sw.Agents != nil {
		w.LowerKnown = true
		if reachable {
			w.AgentMin = agentMin
			w.Exists = agentMin <= w.HumanMax
			if agentMin > 0 && w.Exists {
				w.Decades = math.Log10(w.HumanMax / agentMin)
			}
		}
	}
	return sw, w
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	return nil
}

// ReadReport decodes a report written by WriteJSON.
func ReadReport(rd io.Reader) (*Report, error) {
	var r Report
	dec := json.NewDecoder(io.LimitReader(rd, 256<<20))
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("decode report: %w", err)
	}
	if r.Version != ReportVersion {
		return nil, fmt.Errorf("decode report: version %d, want %d", r.Version, ReportVersion)
	}
	return &r, nil
}

// Class returns the class with the given name.
func (r *Report) Class(name string) (Class, bool) {
	for _, c := range r.Classes {
		if c.Name == name {
			return c, true
		}
	}
	return Class{}, false
}

func pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

func pctCI(r Rate) string {
	if r.N == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%s [%s, %s]", pct(r.Value), pct(r.Low), pct(r.High))
}

// WriteText writes the report as human-readable tables.
func (r *Report) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	tau := fmt.Sprintf("tau=%gs", r.Policy.Tau)
	if r.Policy.DeriveTau {
		tau = fmt.Sprintf("tau=alpha*LB, alpha=%g", r.Policy.Alpha)
	}
	ew.printf("aCAPTCHA evaluation: source %s, %d sessions per class, seed %d\n", r.Source, r.Sessions, r.Seed)
	ew.printf("policy: %d rounds, %s, T_total=%gs, RTT credit %gs\n", r.Policy.Rounds, tau, r.Policy.Total, r.Policy.RTTCredit)
	if r.SourceKind != "" {
		ew.printf("source kind: %s (picks the white-box attackers)\n", r.SourceKind)
	}
	if r.AttackSeed != 0 {
		ew.printf("random attacker: seed %d", r.AttackSeed)
		if v := r.Validation; v != nil && v.RandomSeed != 0 {
			if v.RandomSeed == r.AttackSeed {
				ew.printf(" (the validation filter's own: 0 by construction on what it kept)")
			} else {
				ew.printf(" (the validation filter's is seed %d)", v.RandomSeed)
			}
		}
		ew.printf("\n")
	}
	ew.printf("corpus: %d sets drawn (%d distinct%s), narratives %d..%d tokens (mean %.0f)\n\n",
		r.Corpus.Drawn, r.Corpus.Distinct, map[bool]string{true: ", cycled", false: ""}[r.Corpus.Cycled],
		r.Corpus.MinTokens, r.Corpus.MaxTokens, r.Corpus.MeanTokens)

	tw := tabwriter.NewWriter(ew, 2, 8, 2, ' ', 0)
	hdr := "CLASS\tGROUP\tSESSIONS\tPASS [95% CI]"
	for i := 1; i <= r.Policy.Rounds; i++ {
		hdr += fmt.Sprintf("\tR%d", i)
	}
	fmt.Fprintln(tw, hdr+"\tEFF MEDIAN\tEFF P90\tTOP FAILURES")
	for _, c := range r.Classes {
		line := fmt.Sprintf("%s\t%s\t%d\t%s", c.Name, c.Group, c.Sessions, pctCI(c.Pass))
		for _, rs := range c.Rounds {
			line += "\t" + pct(rs.Rate.Value)
		}
		line += fmt.Sprintf("\t%s\t%s\t%s", fmtSecs(c.Effective.Median), fmtSecs(c.Effective.P90), topCounts(c.Failures, 3))
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	// Sessions that ended on an error measured nothing about the class:
	// name the errors, so that an unreachable LLM is not read as 0 %.
	for _, c := range r.Classes {
		if len(c.Errors) == 0 {
			continue
		}
		n := 0
		for _, v := range c.Errors {
			n += v
		}
		ew.printf("\n%s: %d of %d sessions ended on an error, not a judgement (their rows measure nothing about it): %s\n", c.Name, n, c.Sessions, topCounts(c.Errors, 2))
	}
	if err := r.writeSummary(ew); err != nil {
		return err
	}

	ew.printf("\nanswered-round accuracy by reasoning type (answered rounds in parentheses)\n")
	tw = tabwriter.NewWriter(ew, 2, 8, 2, ' ', 0)
	types := make([]string, 0, len(skill.ReasoningTypes))
	for _, t := range skill.ReasoningTypes {
		types = append(types, string(t))
	}
	fmt.Fprintln(tw, "CLASS\t"+strings.ToUpper(strings.Join(types, "\t"))+"\tENTITY\tNUMERIC\tLABEL")
	for _, c := range r.Classes {
		if c.Kind == KindHuman {
			continue
		}
		line := c.Name
		for _, t := range types {
			line += "\t" + typeCell(c.ByReasoning[t])
		}
		for _, t := range skill.AnswerTypes {
			line += "\t" + typeCell(c.ByAnswerType[string(t)])
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write report: %w", err)
	}

	ew.printf("\nfailed sessions by the reasoning type of the failing question\n")
	tw = tabwriter.NewWriter(ew, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "CLASS\t"+strings.ToUpper(strings.Join(types, "\t")))
	for _, c := range r.Classes {
		line := c.Name
		for _, t := range types {
			line += fmt.Sprintf("\t%d", c.FailuresByReasoning[t])
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write report: %w", err)
	}

	h := r.Human
	ew.printf("\nhuman model (%d Monte Carlo samples; R~N(%g,%g) clipped [%g,%g] tok/s, L~U(%g,%g))\n",
		h.Round.N, h.Model.ReadRateMean, h.Model.ReadRateSD, h.Model.ReadRateMin, h.Model.ReadRateMax, h.Model.LMin, h.Model.LMax)
	ew.printf("  Eq. 6 lower bound at L=%d: %s per round (at the corpus mean: %s)\n", h.LowerBoundTokens, fmtSecs(h.LowerBound), fmtSecs(h.LowerBoundCorpus))
	ew.printf("  per round: median %s, p5 %s, fastest %s (model minimum %s)\n", fmtSecs(h.Round.Median), fmtSecs(h.Round.P05), fmtSecs(h.Round.Min), fmtSecs(h.ModelMin))
	ew.printf("  per session (slowest of %d rounds): median %s, fastest %s\n", r.Policy.Rounds, fmtSecs(h.Session.Median), fmtSecs(h.Session.Min))
	if !r.Policy.DeriveTau {
		ew.printf("  completion at tau=%gs: per round %s (95%% upper %s), per session %s (95%% upper %s)\n",
			r.Policy.Tau, pct(h.RoundAtTau), fmtProb(h.RoundAtTauUpper), pct(h.SessionAtTau), fmtProb(h.SessionAtTauUpper))
	}

	ew.printf("\nthreshold sweep (selected tau)\n")
	tw = tabwriter.NewWriter(ew, 2, 8, 2, ' ', 0)
	names := make([]string, 0, len(r.Sweep.Agents))
	for n := range r.Sweep.Agents {
		names = append(names, n)
	}
	sort.Strings(names)
	hdr = "TAU\tHUMAN/ROUND\tHUMAN/SESSION\tLB-READER/ROUND"
	for _, n := range names {
		hdr += "\t" + n
	}
	fmt.Fprintln(tw, hdr)
	for _, want := range []float64{1, 2, 5, 10, 15, 20, 30, 50, 80, 100, 150, 200, 300, 600} {
		i := nearest(r.Sweep.Tau, want)
		if i < 0 {
			break
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%s", fmtSecs(r.Sweep.Tau[i]), pct(at(r.Sweep.HumanRound, i)), pct(at(r.Sweep.HumanSession, i)), pct(at(r.Sweep.HumanRoundLB, i)))
		for _, n := range names {
			line += "\t" + pct(at(r.Sweep.Agents[n], i))
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	win := r.Window
	ew.printf("\nfeasible tau window (agents >= %s, human per round <= %s): ", pct(win.AgentTarget), pct(win.HumanLimit))
	switch {
	case !win.LowerKnown:
		ew.printf("upper edge %s (human side only)\n", fmtSecs(win.HumanMax))
	case win.AgentMin == 0:
		ew.printf("none: an agent never reaches %s\n", pct(win.AgentTarget))
	case win.Exists:
		ew.printf("%s .. %s (%.2f decades)\n", fmtSecs(win.AgentMin), fmtSecs(win.HumanMax), win.Decades)
	default:
		ew.printf("none: agents need %s, humans reach %s at %s\n", fmtSecs(win.AgentMin), pct(win.HumanLimit), fmtSecs(win.HumanMax))
	}
	ew.printf("  conservative upper edge (Eq. 6 lower-bound reader, no comprehension overhead): %s\n", fmtSecs(win.HumanMaxLB))
	if r.NoAgent != "" {
		ew.printf("\nNOTE: %s\n", r.NoAgent)
	}
	for _, n := range r.Notes {
		ew.printf("note: %s\n", n)
	}
	ew.printf("\nelapsed %.1fs\n", r.ElapsedSeconds)
	return ew.err
}

func at(xs []float64, i int) float64 {
	if i < 0 || i >= len(xs) {
		return 0
	}
	return xs[i]
}

func nearest(xs []float64, v float64) int {
	best, bd := -1, math.Inf(1)
	for i, x := range xs {
		if d := math.Abs(math.Log(x) - math.Log(v)); d < bd {
			best, bd = i, d
		}
	}
	return best
}

func typeCell(t TypeStat) string {
	if t.Answered == 0 {
		return "-"
	}
	return fmt.Sprintf("%s (%d)", pct(t.Accuracy), t.Answered)
}

func topCounts(m map[string]int, n int) string {
	type kv struct {
		k string
		v int
	}
	var kvs []kv
	for k, v := range m {
		kvs = append(kvs, kv{k, v})
	}
	sort.Slice(kvs, func(a, b int) bool {
		if kvs[a].v != kvs[b].v {
			return kvs[a].v > kvs[b].v
		}
		return kvs[a].k < kvs[b].k
	})
	var parts []string
	for i := 0; i < len(kvs) && i < n; i++ {
		parts = append(parts, fmt.Sprintf("%s=%d", kvs[i].k, kvs[i].v))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func fmtSecs(s float64) string {
	switch {
	case s == 0:
		return "0s"
	case s < 0.001:
		return fmt.Sprintf("%.0fµs", s*1e6)
	case s < 1:
		return fmt.Sprintf("%.1fms", s*1e3)
	case s < 100:
		return fmt.Sprintf("%.1fs", s)
	default:
		return fmt.Sprintf("%.0fs", s)
	}
}

func fmtProb(p float64) string {
	if p < 0.001 {
		return fmt.Sprintf("%.1e", p)
	}
	return pct(p)
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	if err != nil {
		e.err = fmt.Errorf("write report: %w", err)
	}
	return n, err
}

func (e *errWriter) printf(format string, args ...any) {
	fmt.Fprintf(e, format, args...)
}

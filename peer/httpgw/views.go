package httpgw

import (
	"encoding/json"
	"time"

	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// Session is the JSON body every session route returns (spec/http.md
// §4): the session's state and what the agent needs in it. Byte slices
// are standard base64 in JSON.
type Session struct {
	SessionID string    `json:"session_id"`
	State     string    `json:"state"`
	PeerID    string    `json:"peer_id"`
	Verifier  string    `json:"verifier"`
	ExpiresAt time.Time `json:"expires_at"`
	// awaiting_start
	Nonce         []byte      `json:"nonce,omitempty"`
	PowDifficulty *int        `json:"pow_difficulty,omitempty"`
	StartMessage  []byte      `json:"start_message,omitempty"`
	Policy        *PolicyView `json:"policy,omitempty"`
	// probing
	Probe *Probe `json:"probe,omitempty"`
	// answering
	Challenge *Challenge `json:"challenge,omitempty"`
	// done
	Result *Result `json:"result,omitempty"`
	// expired
	Error *ErrorBody `json:"error,omitempty"`
}

// PolicyView is the policy a session runs under (spec/http.md §4.1).
type PolicyView struct {
	Rounds      int     `json:"rounds"`
	TauMs       int64   `json:"tau_ms"`
	DerivedTau  bool    `json:"derived_tau"`
	Alpha       float64 `json:"alpha,omitempty"`
	TotalMs     int64   `json:"total_ms"`
	RTTCreditMs int64   `json:"rtt_credit_ms"`
}

func newPolicyView(p skill.Policy) *PolicyView {
	v := &PolicyView{Rounds: p.Rounds, DerivedTau: p.DeriveTau, TotalMs: p.Total.Milliseconds(), RTTCreditMs: p.RTTCredit.Milliseconds()}
	if p.DeriveTau {
		v.Alpha = p.Alpha
	} else {
		v.TauMs = p.Tau.Milliseconds()
	}
	return v
}

// Probe is an RTT probe to echo (spec/http.md §4.3).
type Probe struct {
	Seq      int    `json:"seq"`
	Of       int    `json:"of"`
	Nonce    []byte `json:"nonce"`
	WithinMs int64  `json:"within_ms"`
}

// Challenge is one round's challenge (spec/http.md §4.4).
type Challenge struct {
	Round     int    `json:"round"`
	Rounds    int    `json:"rounds"`
	Domain    string `json:"domain"`
	Narrative string `json:"narrative"`
	Question  string `json:"question"`
	BudgetMs  int64  `json:"budget_ms"`
	// Kind names the challenge's kind (spec/generation.md, "Kinds");
	// absent for the narrative kind, as on the wire.
	Kind string `json:"kind,omitempty"`
	// AnswerWithinMs is the wait for the answer from this response's
	// rendering, RTT credit included and cut by what remains of T_total:
	// at delivery the whole wait, on a later GET what is left of it (at
	// least 0).
	AnswerWithinMs int64 `json:"answer_within_ms"`
}

// Round is one round as the verifier measured it.
type Round struct {
	Round       int   `json:"round"`
	Answered    bool  `json:"answered"`
	Correct     bool  `json:"correct"`
	BudgetMs    int64 `json:"budget_ms"`
	ElapsedMs   int64 `json:"elapsed_ms"`
	EffectiveMs int64 `json:"effective_ms"`
}

// Result is a finished session's outcome (spec/http.md §4.5).
type Result struct {
	Accepted bool `json:"accepted"`
	// Verdict is ACCEPTED, REJECTED or INCONCLUSIVE.
	Verdict     string  `json:"verdict"`
	Reason      string  `json:"reason"`
	FailedRound int     `json:"failed_round"`
	Detail      string  `json:"detail,omitempty"`
	Rounds      []Round `json:"rounds"`
	RTTMs       int64   `json:"rtt_ms"`
	CreditMs    int64   `json:"credit_ms"`
	// Attestation is the signed envelope (standard base64); absent for
	// inconclusive verdicts, which are never signed.
	Attestation []byte `json:"attestation,omitempty"`
	// Record is the attestation's JSON view (spec/attestation.md §8).
	Record json.RawMessage `json:"record,omitempty"`
}

// VerdictWord is the one-word verdict: ACCEPTED, REJECTED or INCONCLUSIVE.
func VerdictWord(accepted bool, r skill.Reason) string {
	switch {
	case accepted:
		return "ACCEPTED"
	case r == skill.ReasonInconclusive:
		return "INCONCLUSIVE"
	default:
		return "REJECTED"
	}
}

func newResultView(res *protocol.Result) *Result {
	v := res.Verdict
	out := &Result{
		Accepted: v.Accepted, Verdict: VerdictWord(v.Accepted, v.Reason), Reason: string(v.Reason),
		FailedRound: v.FailedRound, Detail: v.Detail, Rounds: []Round{},
		RTTMs: res.RTT.Milliseconds(), CreditMs: res.Credit.Milliseconds(),
	}
	for _, r := range v.Rounds {
		out.Rounds = append(out.Rounds, Round{Round: r.Round, Answered: r.Answered, Correct: r.Correct,
			BudgetMs: r.Budget.Milliseconds(), ElapsedMs: r.Elapsed.Milliseconds(), EffectiveMs: r.Effective.Milliseconds()})
	}
	if len(res.Envelope) > 0 {
		out.Attestation = res.Envelope
		if b, err := json.Marshal(res.Attestation); err == nil {
			out.Record = b
		}
	}
	return out
}

// view renders the session. Called with s.mu held.
func (g *Gateway) view(s *session) *Session {
	v := &Session{SessionID: s.id, State: s.state, PeerID: s.peer.String(), Verifier: g.cfg.Core.Self().String(), ExpiresAt: s.expires.UTC()}
	switch s.state {
	case StateAwaitingStart:
		d := s.core.PowDifficulty()
		v.Nonce, v.PowDifficulty = s.core.Nonce(), &d
		v.StartMessage = StartMessage(s.id, s.core.Nonce(), g.cfg.Core.Self(), s.peer)
		v.Policy = newPolicyView(g.cfg.Core.Policy())
	case StateProbing:
		v.Probe = &Probe{Seq: s.probeSeq, Of: g.cfg.Probes, Nonce: s.probeNonce, WithinMs: g.cfg.ProbeTimeout.Milliseconds()}
	case StateAnswering:
		c := s.ch
		v.Challenge = &Challenge{Round: c.Round, Rounds: c.Rounds, Domain: c.Domain, Narrative: c.Narrative,
			Question: c.Question, BudgetMs: c.Budget.Milliseconds(), Kind: skill.WireKind(c.Kind)}
		if !s.answerBy.IsZero() {
			// A GET after delivery: the time left to the deadline (it
			// gave the whole wait again, which a client re-reading its
			// session after a dropped connection took as the time left).
			v.Challenge.AnswerWithinMs = max(s.answerBy.Sub(g.now()), 0).Milliseconds()
			break
		}
		since := time.Duration(0)
		if c.Round > 1 {
			since = g.now().Sub(s.start)
		}
		v.Challenge.AnswerWithinMs = s.core.AnswerDeadline(since).Milliseconds()
	case StateDone:
		if s.result != nil {
			v.Result = newResultView(s.result)
			if s.noSet {
				// As on libp2p: the source's error (a corpus path, a
				// model, a provider's message) is for the node's log.
				v.Result.Detail = protocol.NoChallengeDetail
			}
		}
	case StateExpired:
		v.Error = &ErrorBody{Code: CodeExpiredSession, Message: s.endErr.Error()}
	}
	return v
}

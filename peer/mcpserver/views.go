package mcpserver

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// VerdictView is one side's verdict of a mutual attestation.
type VerdictView struct {
	Verifier string `json:"verifier" jsonschema:"peer ID of the verifier"`
	Subject  string `json:"subject" jsonschema:"peer ID of the verified peer"`
	Accepted bool   `json:"accepted"`
	// Verdict is ACCEPTED, REJECTED or INCONCLUSIVE; DECLINED or BUSY
	// for a peer that refused its session at the hello (nothing signed);
	// NONE for a verdict that did not come.
	Verdict     string `json:"verdict" jsonschema:"ACCEPTED, REJECTED or INCONCLUSIVE; DECLINED or BUSY when the peer refused to be verified at the hello (nothing signed); NONE when there is no verdict (error says why)"`
	Reason      string `json:"reason" jsonschema:"machine reason: ok, wrong_answer, timeout, total_timeout, protocol_error, declined, busy or inconclusive"`
	FailedRound int    `json:"failed_round,omitempty" jsonschema:"the round that decided a rejection"`
	Detail      string `json:"detail,omitempty"`
	// Rounds are the rounds as the verifier measured them (our own
	// verification only; of theirs we know how many rounds we answered).
	Rounds         []RoundView `json:"rounds,omitempty" jsonschema:"rounds as this node measured them (our verification of the peer only)"`
	RoundsAnswered int         `json:"rounds_answered,omitempty" jsonschema:"rounds this node answered (the peer's verification of us)"`
	RTTMs          int64       `json:"rtt_ms,omitempty" jsonschema:"minimum probe round trip"`
	CreditMs       int64       `json:"credit_ms,omitempty" jsonschema:"round trip credited to each round (capped)"`
	// Stored says the verdict came from the store (a standing verdict
	// the peer did not renew).
	Stored bool `json:"stored,omitempty" jsonschema:"the peer's standing verdict from the store; it was not asked again"`
	// Record is the signed attestation envelope, base64 (inconclusive
	// verdicts are not signed).
	Record      string         `json:"record,omitempty" jsonschema:"signed attestation envelope, base64 (verify it with verify_attestation)"`
	RecordError string         `json:"record_error,omitempty" jsonschema:"why the peer's record did not verify"`
	Attestation map[string]any `json:"attestation,omitempty" jsonschema:"the signed record's fields (display form)"`
	Error       string         `json:"error,omitempty" jsonschema:"why there is no verdict"`
}

// RoundView is one round of our verification of a peer.
type RoundView struct {
	Round         int    `json:"round"`
	ReasoningType string `json:"reasoning_type"`
	Answer        string `json:"answer" jsonschema:"what the peer answered"`
	Answered      bool   `json:"answered"`
	Correct       bool   `json:"correct"`
	EffectiveMs   int64  `json:"effective_ms" jsonschema:"elapsed minus the RTT credit"`
	ElapsedMs     int64  `json:"elapsed_ms"`
	BudgetMs      int64  `json:"budget_ms"`
}

// verdictWord is the one-word verdict the CLI prints.
func verdictWord(accepted bool, r skill.Reason) string {
	switch {
	case accepted:
		return "ACCEPTED"
	case r == skill.ReasonInconclusive:
		return "INCONCLUSIVE"
	default:
		return "REJECTED"
	}
}

func attestationMap(a *protocol.Attestation) map[string]any {
	if a == nil {
		return nil
	}
	b, err := json.Marshal(a)
	if err != nil {
		return map[string]any{"error": fmt.Sprintf("render attestation: %v", err)}
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return map[string]any{"error": fmt.Sprintf("render attestation: %v", err)}
	}
	return m
}

func oursView(self string, r *protocol.Result) *VerdictView {
	v := r.Verdict
	out := &VerdictView{
		Verifier: self, Subject: r.Peer.String(),
		Accepted: v.Accepted, Verdict: verdictWord(v.Accepted, v.Reason), Reason: string(v.Reason),
		FailedRound: v.FailedRound, Detail: v.Detail,
		RTTMs: r.RTT.Milliseconds(), CreditMs: r.Credit.Milliseconds(),
	}
	for _, rr := range v.Rounds {
		out.Rounds = append(out.Rounds, RoundView{
			Round: rr.Round, ReasoningType: string(rr.ReasoningType), Answer: rr.Answer,
			Answered: rr.Answered, Correct: rr.Correct,
			EffectiveMs: rr.Effective.Milliseconds(), ElapsedMs: rr.Elapsed.Milliseconds(), BudgetMs: rr.Budget.Milliseconds(),
		})
	}
	if len(r.Envelope) > 0 {
		out.Record = base64.StdEncoding.EncodeToString(r.Envelope)
	}
	out.Attestation = attestationMap(r.Attestation)
	return out
}

func theirsView(self string, m *peer.Mutual) *VerdictView {
	out := &VerdictView{Verifier: m.Peer.String(), Subject: self}
	t := m.Theirs
	if t == nil {
		out.Verdict = "NONE"
		out.Error = fmt.Sprint(m.TheirsErr)
		return out
	}
	out.Accepted, out.Reason, out.FailedRound, out.Detail = t.Accepted, string(t.Reason), t.FailedRound, t.Detail
	out.Verdict = verdictWord(t.Accepted, t.Reason)
	out.RoundsAnswered = t.Rounds
	out.Stored = m.TheirsStored
	if t.Err != nil {
		out.Verdict = "NONE"
		out.Error = "the peer's verification of us broke off: " + t.Err.Error()
	}
	if len(t.Envelope) > 0 {
		out.Record = base64.StdEncoding.EncodeToString(t.Envelope)
	}
	if t.AttestationErr != nil {
		out.RecordError = t.AttestationErr.Error()
	}
	out.Attestation = attestationMap(t.Attestation)
	return out
}

// EntryView is one stored attestation.
type EntryView struct {
	Key       string `json:"key" jsonschema:"store key (acaptcha attestations show KEY)"`
	Direction string `json:"direction" jsonschema:"issued (this node verified the subject) or received (a verifier attested this node)"`
	Issuer    string `json:"issuer"`
	Subject   string `json:"subject"`
	Accepted  bool   `json:"accepted"`
	Verdict   string `json:"verdict"`
	Reason    string `json:"reason"`
	Source    string `json:"source" jsonschema:"challenge source the record names"`
	IssuedAt  string `json:"issued_at"`
	ExpiresAt string `json:"expires_at"`
	ValidNow  bool   `json:"valid_now" jsonschema:"signature checked and not expired"`
	Record    string `json:"record,omitempty" jsonschema:"signed envelope, base64 (with include_records)"`
}

func entryView(e peer.Entry, now time.Time, withRecord bool) EntryView {
	a := e.Attestation
	v := EntryView{
		Key: e.Key, Direction: string(e.Direction), Issuer: a.Issuer.String(), Subject: a.Subject.String(),
		Accepted: a.Accepted, Verdict: verdictWord(a.Accepted, a.Reason), Reason: string(a.Reason),
		Source:   protocol.SourceName(a.Provenance.Source),
		IssuedAt: a.IssuedAt.UTC().Format(time.RFC3339), ExpiresAt: a.ExpiresAt.UTC().Format(time.RFC3339),
		ValidNow: a.Valid(now),
	}
	if withRecord {
		v.Record = base64.StdEncoding.EncodeToString(e.Envelope)
	}
	return v
}

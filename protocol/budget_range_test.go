package protocol

import (
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/skill"
)

// budgetAboveTotalPolicy derives budgets with alpha 0.2 under a 20 s
// total: the test sets' narratives (about 530 tokens) derive about 23.6 s,
// above the Hello's total_ms, which a prover refuses as a protocol
// violation (spec/protocol.md §3, §6 step 7).
func budgetAboveTotalPolicy() skill.Policy {
	p := skill.DefaultPolicy()
	p.DeriveTau, p.Alpha, p.Total = true, 0.2, 20*time.Second
	return p
}

// TestVerifyBudgetAboveTotalIsInconclusive: a set whose derived budgets
// the wire cannot carry is refused when the session is created, like one
// over the human fraction: the session ends inconclusive and nothing is
// signed. Before, the Challenge went out with budget_ms above total_ms,
// the honest prover reset with a protocol violation and was signed
// protocol_error.
func TestVerifyBudgetAboveTotalIsInconclusive(t *testing.T) {
	a, b := newHost(t), newHost(t)
	src := sourceOf("budget-above-total")
	va := newService(t, a, Config{Source: src, Policy: budgetAboveTotalPolicy()})
	pr := newProved()
	newService(t, b, Config{Prover: oracleProver(0, src.sets...), OnProved: pr.fn})
	connect(t, a, b, "tcp")
	res, err := va.Verify(testCtx(t, 10*time.Second), b.ID(), false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict.Reason != skill.ReasonInconclusive || res.Attestation != nil || res.Envelope != nil || len(res.Verdict.Rounds) != 0 {
		t.Fatalf("verdict %s (%s), attestation %v", res.Verdict.Reason, res.Verdict.Detail, res.Attestation != nil)
	}
	got := pr.next(t)
	if got.Err != nil || got.Reason != skill.ReasonInconclusive || got.Envelope != nil || got.Rounds != 0 {
		t.Fatalf("prover result: err %v reason %s rounds %d", got.Err, got.Reason, got.Rounds)
	}
}

// TestCoreBudgetAboveTotal: through the transport-free core, the refused
// set leaves the paid session done and inconclusive, unsigned, with the
// draw refunded (a one-draw share can try again).
func TestCoreBudgetAboveTotal(t *testing.T) {
	src := sourceOf("core-budget-above-total")
	v := newService(t, newHost(t), Config{Source: src, Policy: budgetAboveTotalPolicy(), MaxDrawsPerPeer: 1}).Core()
	p := randomPeer(t)
	for range 2 {
		vs := paidSession(t, v, p, BeginOptions{})
		if !vs.Done() {
			t.Fatal("a session whose set was refused is not done")
		}
		if c, ok := vs.Next(); ok {
			t.Fatalf("challenge with budget %s under a %s total", c.Budget, budgetAboveTotalPolicy().Total)
		}
		res := vs.Finish()
		if res.Verdict.Reason != skill.ReasonInconclusive || res.Attestation != nil || res.Verdict.Detail == "" {
			t.Fatalf("refused set: %+v", res.Verdict)
		}
	}
}

package protocol

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/protocol/pb"
)

// A verifier that resets its stream at each step of a session (before
// its hello, after it, after the ack, after paying, while the answerer
// thinks, after the answer) leaves nothing behind at the prover: its
// inbound slots, its per-peer and per-group counts, the goroutines of the
// session, and the prompt-token hold and unused answerer calls of the
// budgets (only the round answered stays spent). Each step runs from a
// fresh peer ID, as an attacker's would.
func TestResetAtEachStepLeavesNothing_h114(t *testing.T) {
	set := testSet("reset-steps")
	b := newHost(t)
	prover := &countingProver{Prover: oracleProver(300*time.Millisecond, set)}
	svc := newService(t, b, Config{Prover: prover, PayDifficulty: 8})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	challenge := &pb.Frame{Body: &pb.Frame_Challenge{Challenge: &pb.Challenge{Round: 1, Rounds: 3, Domain: set.Domain,
		Narrative: set.Parts[0].Narrative, Question: set.Parts[0].Questions[0].Question, BudgetMs: 15000}}}
	budgetsLeft := func() (tokens, calls float64) {
		bu := svc.budgets
		bu.mu.Lock()
		defer bu.mu.Unlock()
		now := svc.now()
		bu.tokens.refill(float64(svc.cfg.MaxProverTokens), time.Hour, now)
		bu.calls.refill(float64(svc.cfg.MaxProverCalls), time.Hour, now)
		return bu.tokens.tokens, bu.calls.tokens
	}
	held := func() (inbound, peers, prefixes int) {
		svc.mu.Lock()
		defer svc.mu.Unlock()
		return svc.inbound, len(svc.perPeer), len(svc.perPrefix)
	}
	// A warm-up session's host, so that the baseline counts libp2p's
	// goroutines of a connected peer.
	warm := newHost(t)
	connect(t, warm, b, "tcp")
	runtime.GC()
	base := runtime.NumGoroutine()
	steps := []string{"open", "hello", "ack", "paid", "thinking", "answered"}
	for i, step := range steps {
		m := newHost(t)
		connect(t, m, b, "tcp")
		r := openRaw(t, m, b.ID())
		func() {
			if step == "open" {
				_, _ = r.s.Write(nil)
				return
			}
			r.send(helloFrame(m.ID(), b.ID(), nil))
			if step == "hello" {
				return
			}
			f, err := r.recv()
			ack := f.GetHelloAck()
			if err != nil || ack == nil {
				t.Fatalf("step %s: hello ack %v %v", step, f, err)
			}
			if step == "ack" {
				return
			}
			pay, err := SolvePay(ctx, ack.GetPayNonce(), m.ID(), int(ack.GetPayDifficulty()), 22)
			if err != nil {
				t.Fatal(err)
			}
			r.send(&pb.Frame{Body: &pb.Frame_Probe{Probe: &pb.Probe{Seq: 1, Nonce: make([]byte, 8), Pay: pay}}})
			if step == "paid" {
				return
			}
			if f, err := r.recv(); err != nil || f.GetProbeAck() == nil {
				t.Fatalf("step %s: probe ack %v %v", step, f, err)
			}
			r.send(challenge)
			if step == "thinking" {
				// Reset while the answerer thinks (300 ms).
				waitFor(t, "the answerer to be called", func() bool { return prover.calls.Load() == 1 })
				return
			}
			if f, err := r.recv(); err != nil || f.GetAnswer() == nil {
				t.Fatalf("step %s: answer %v %v", step, f, err)
			}
		}()
		r.s.Reset()
		m.Close()
		waitFor(t, fmt.Sprintf("step %d (%s) to free its slot", i, step), func() bool {
			in, peers, pfx := held()
			return in == 0 && peers == 0 && pfx == 0
		})
	}
	// Goroutines: back to the baseline (libp2p's closed connections wind
	// down asynchronously).
	var n int
	for deadline := time.Now().Add(10 * time.Second); ; {
		runtime.GC()
		if n = runtime.NumGoroutine(); n <= base+2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n > base+2 {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines after the resets, %d before:\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
	tokens, calls := budgetsLeft()
	t.Logf("after %d reset sessions: %d goroutines (baseline %d), global tokens %.0f of %d, calls %.1f of %d",
		len(steps), n, base, tokens, svc.cfg.MaxProverTokens, calls, svc.cfg.MaxProverCalls)
	// Two rounds ran the answerer (thinking, answered): their calls and
	// tokens stay spent; the holds and the other calls came back.
	roundTokens := float64(SessionTokens(1))
	if tokens < float64(svc.cfg.MaxProverTokens)-2*roundTokens-1 {
		t.Fatalf("global tokens %.0f of %d after the resets: a session's hold was not given back", tokens, svc.cfg.MaxProverTokens)
	}
	if calls < float64(svc.cfg.MaxProverCalls)-2-0.01 {
		t.Fatalf("global calls %.1f of %d after the resets: unused calls were not refunded", calls, svc.cfg.MaxProverCalls)
	}
}

package abuse

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestBenchShort runs the full mix for a few seconds and asserts the
// acceptance bounds of issue 10 (the --check semantics), and that the
// harness really measured: honest sessions ran and were signed, every
// attack made attempts, the node's source count matches the per-peer
// accounting.
func TestBenchShort(t *testing.T) {
	if testing.Short() {
		t.Skip("bench run")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := Config{Duration: 8 * time.Second, Dir: t.TempDir(), Progress: t.Logf}
	if raceEnabled {
		cfg.Duration, cfg.Pace, cfg.Scale = 20*time.Second, 50*time.Millisecond, 0.5
		// The payment drain's hashing (2^22 per payment, several at
		// once) on top of the race detector's slowdown starves the
		// node's timers on 2 cores; TestPayDrain runs it alone.
		cfg.Attacks = slices.DeleteFunc(slices.Clone(Attacks), func(a string) bool { return a == AttackPayDrain })
	}
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("honest %+v; rss %d MiB; goroutines %d; store %d -> %d; sets %d; calls %d/%d",
		rep.Honest, rep.PeakRSS>>20, rep.PeakGoroutines, rep.StoreBefore, rep.StoreAfter, rep.SetsServed, rep.AnswererCalls, rep.AnswererBudget)
	for _, a := range rep.Attack {
		t.Logf("%-22s ids %3d sessions %5d paid %3d drawn %3d returned %3d refused %3d signed %3d calls %d/%d; %s",
			a.Name, a.Identities, a.Sessions, a.Paid, a.Drawn, a.Returned, a.Refused, a.Signatures, a.Calls, a.CallBudget, a.Detail)
		if a.Sessions == 0 {
			t.Errorf("attack %s made no attempt", a.Name)
		}
		// The node asks every verifier that comes to it for the payment
		// of spec/protocol.md §5b: the hostile verifiers that pay are
		// answered, the others are not (CheckCost's UnpaidAnswered).
		if a.Name == AttackProverCost && (a.PayHashes == 0 || a.Calls == 0) {
			t.Errorf("hostile verifiers: %d payment hashes, %d answerer calls: the payment path did not run", a.PayHashes, a.Calls)
		}
	}
	if raceEnabled {
		t.Logf("race detector on: speed-dependent bounds not asserted: %v", rep.Failed)
		if f := rep.CheckCost(); len(f) > 0 {
			t.Fatalf("cost bounds failed: %v", f)
		}
	} else if len(rep.Failed) > 0 {
		t.Fatalf("acceptance bounds failed: %v", rep.Failed)
	}
	if rep.HonestProver.Count == 0 || rep.HonestVerifier.Count == 0 {
		t.Fatalf("honest flows did not both run: %+v %+v", rep.HonestProver, rep.HonestVerifier)
	}
	if rep.SessionsLogged == 0 {
		t.Fatal("no verifier session was counted in the node's log (message renamed?)")
	}
}

// TestProversSmall runs performance P3 with a small in-process fleet:
// every prover is served and no goroutine is left behind.
func TestProversSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("bench run")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := RunProvers(ctx, ProversConfig{N: 40, Baseline: 5, Sets: 8, Dir: t.TempDir(), Progress: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", *rep)
	if rep.Accepted != 40 || rep.Failed != 0 {
		t.Fatalf("%d of 40 provers served, %d failed: %v", rep.Accepted, rep.Failed, rep.Errors)
	}
	if rep.Concurrent.Rounds != 3*40 || rep.Baseline.Rounds != 3*5 {
		t.Fatalf("rounds measured: %d concurrent, %d baseline", rep.Concurrent.Rounds, rep.Baseline.Rounds)
	}
	if rep.Leaked > 10 {
		t.Fatalf("%d goroutines left after the fleet went away", rep.Leaked)
	}
}

// The fleet's address lines round-trip.
func TestFleetLines(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- ServeFleet(ctx, 3, 1, 2, pw); pw.Close() }()
	addrs, err := ReadFleet(pr, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != 3 || len(addrs[0].Addrs) == 0 || addrs[0].ID == addrs[1].ID {
		t.Fatalf("%v", addrs)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFleet(strings.NewReader("{\"id\":\"bad\"}\n"), 1); err == nil {
		t.Fatal("a bad line was accepted")
	}
	if _, err := ReadFleet(strings.NewReader(""), 1); err == nil {
		t.Fatal("a fleet that never got ready was accepted")
	}
}

// A run whose attackers took the whole duration to deploy (a loaded
// machine, the race detector) still gives the honest flows a quarter of
// it: before, they never started and the run reported no honest session.
func TestHonestWindowAfterSlowRampUp(t *testing.T) {
	const d = 20 * time.Second
	for _, c := range []struct{ ramp, want time.Duration }{
		{0, d},
		{2 * time.Second, 18 * time.Second},
		{15 * time.Second, 5 * time.Second},
		{20 * time.Second, 5 * time.Second},
		{40 * time.Second, 5 * time.Second},
	} {
		if got := honestWindow(d, c.ramp); got != c.want {
			t.Errorf("ramp-up %s: honest window %s, want %s", c.ramp, got, c.want)
		}
	}
}

// A ramp-up longer than the run plus its quarter (TestBenchAbuseCheck
// under -race on a loaded 2-core machine: 26.9 s for a 20 s run) still
// leaves the honest flows their quarter: deployment stops at Duration and
// the identities up by then attack while the honest flows run. Before,
// one deadline of Duration plus a quarter bounded both, ended the run
// before the honest flows started, and the report had no honest session
// (honest {Count:0 Failures:0}).
func TestHonestFlowsRunAfterRampUpPastTheRun(t *testing.T) {
	if testing.Short() {
		t.Skip("bench run")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const d = 2 * time.Second
	// 16 identities 200 ms apart: 3.2 s of ramp-up, past d + d/4.
	cfg := Config{Duration: d, Attacks: []string{AttackSilentContact}, Dir: t.TempDir(), Progress: t.Logf,
		deployPause: 200 * time.Millisecond}
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.HonestProver.Count == 0 || rep.HonestVerifier.Count == 0 || rep.Honest.Failures != 0 {
		t.Fatalf("ramp-up %s of a %s run: honest prover %+v, honest verifier %+v; want both flows run and accepted",
			rep.RampUp, d, rep.HonestProver, rep.HonestVerifier)
	}
	if ids := rep.Attack[0].Identities; ids == 0 || ids >= defaultIdentities[AttackSilentContact] {
		t.Fatalf("%d identities deployed; want some, and not all %d (deployment stops at the run's duration)", ids, defaultIdentities[AttackSilentContact])
	}
}

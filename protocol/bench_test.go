package protocol

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol/pb"
)

// benchPair is a verifier service on a and an instant oracle prover on b,
// connected over transport.
func benchPair(b *testing.B, transport string, probes int) (*Service, host.Host) {
	b.Helper()
	ha, hb := newHost(b), newHost(b)
	src := sourceOf("bench-" + transport)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	// The benchmarks measure the protocol, not the per-peer quotas: one
	// pair runs many thousand sessions, so the budgets are lifted.
	const many = 1 << 30
	va := newService(b, ha, Config{Source: src, Probes: probes, Logger: quiet, MaxDrawsPerPeer: many, MaxDraws: many})
	newService(b, hb, Config{Prover: oracleProver(0, src.sets...), Logger: quiet,
		MaxSessionsPerVerifier: many, MaxCallsPerVerifier: many, MaxTokensPerVerifier: many, MaxProverCalls: many,
		MaxSessionsPerVerifierPrefix: many, MaxProverSessions: many, MaxProverTokens: many})
	connect(b, ha, hb, transport)
	return va, hb
}

// BenchmarkPingRTT is the baseline: one go-libp2p ping round trip (32
// bytes each way) on the same loopback hosts.
func BenchmarkPingRTT(b *testing.B) {
	for _, tr := range transports {
		b.Run(tr, func(b *testing.B) {
			ha, hb := newHost(b), newHost(b)
			connect(b, ha, hb, tr)
			ctx, cancel := context.WithCancel(context.Background())
			results := ping.Ping(ctx, ha, hb.ID())
			for b.Loop() {
				r := <-results
				if r.Error != nil {
					b.Fatal(r.Error)
				}
			}
			cancel()
			for range results {
			}
		})
	}
}

// BenchmarkRoundOverhead measures one protocol round with an instant
// answerer, as the verifier times it (challenge write returned -> answer
// read): the overhead the protocol adds on top of the prover's thinking
// time. Compare ns/round with BenchmarkPingRTT's ns/op.
func BenchmarkRoundOverhead(b *testing.B) {
	for _, tr := range transports {
		b.Run(tr, func(b *testing.B) {
			va, hb := benchPair(b, tr, 1)
			var (
				sum    time.Duration
				rtt    time.Duration
				rounds int
				n      int
			)
			for b.Loop() {
				res := verifyAccepted(b, va, hb)
				for _, r := range res.Verdict.Rounds {
					sum += r.Elapsed
					rounds++
				}
				rtt += res.RTT
				n++
			}
			b.ReportMetric(float64(sum.Nanoseconds())/float64(rounds), "ns/round")
			b.ReportMetric(float64(rtt.Nanoseconds())/float64(n), "probe-rtt-ns")
		})
	}
}

// BenchmarkRoundVsPing is P1 measured so that drift in the machine's
// speed cancels out: every iteration runs one session (its three rounds
// timed by the verifier, as BenchmarkRoundOverhead) and then three go-libp2p
// pings (/ipfs/ping/1.0.0, 32 bytes each way, timed from the write to
// the echo's arrival as ping.Ping does) on the same connection, so rounds
// and pings sample the same moments. It reports the mean and the median
// of both and their ratios (round-x-ping-mean, round-x-ping-p50), and the
// floor: the same challenge frames echoed by a handler without any
// protocol logic (echo-x-ping-mean).
func BenchmarkRoundVsPing(b *testing.B) {
	for _, tr := range transports {
		b.Run(tr, func(b *testing.B) {
			va, hb := benchPair(b, tr, 1)
			ps, err := va.h.NewStream(context.Background(), hb.ID(), ping.ID)
			if err != nil {
				b.Fatal(err)
			}
			defer ps.Reset()
			// The floor: the same challenge frames echoed by a handler
			// with no protocol logic (floorAnswer), timed as the verifier
			// times a round (from the write's return).
			hb.SetStreamHandler(floorProtocol, floorAnswer)
			es, err := va.h.NewStream(context.Background(), hb.ID(), floorProtocol)
			if err != nil {
				b.Fatal(err)
			}
			defer es.Reset()
			er := newFrameReader(es, MaxProverFrame)
			var echoFrames []*pb.Frame
			for i, p := range testSet("bench-" + tr).Parts {
				echoFrames = append(echoFrames, &pb.Frame{Body: &pb.Frame_Challenge{Challenge: &pb.Challenge{
					Round: uint32(i + 1), Rounds: 3, Domain: "d", Narrative: p.Narrative, Question: p.Questions[0].Question, BudgetMs: 30000}}})
			}
			var (
				rounds, pings, echoes []time.Duration
				out, in               [ping.PingSize]byte
				ef                    pb.Frame
			)
			for b.Loop() {
				res := verifyAccepted(b, va, hb)
				for _, r := range res.Verdict.Rounds {
					rounds = append(rounds, r.Elapsed)
				}
				for range len(res.Verdict.Rounds) {
					out[0]++
					t0 := time.Now()
					if _, err := ps.Write(out[:]); err != nil {
						b.Fatal(err)
					}
					if _, err := io.ReadFull(ps, in[:]); err != nil {
						b.Fatal(err)
					}
					pings = append(pings, time.Since(t0))
					if in != out {
						b.Fatal("ping echo differs")
					}
				}
				// After the pings, which sample the connection as the
				// session left it.
				for _, f := range echoFrames {
					if err := writeFrame(es, f, MaxVerifierFrame); err != nil {
						b.Fatal(err)
					}
					t0 := time.Now()
					if err := readFrame(er, &ef); err != nil {
						b.Fatal(err)
					}
					echoes = append(echoes, time.Since(t0))
				}
			}
			rm, rp := meanP50(rounds)
			pm, pp := meanP50(pings)
			em, _ := meanP50(echoes)
			b.ReportMetric(rm, "round-ns")
			b.ReportMetric(pm, "ping-ns")
			b.ReportMetric(em, "echo-ns")
			b.ReportMetric(rm/pm, "round-x-ping-mean")
			b.ReportMetric(rp/pp, "round-x-ping-p50")
			b.ReportMetric(em/pm, "echo-x-ping-mean")
		})
	}
}

// verifyAccepted runs one session of va's against hb, which must accept.
func verifyAccepted(b *testing.B, va *Service, hb host.Host) *Result {
	res, err := va.Verify(context.Background(), hb.ID(), false)
	if err != nil {
		b.Fatal(err)
	}
	if !res.Verdict.Accepted {
		b.Fatalf("verdict %+v", res.Verdict)
	}
	return res
}

// meanP50 returns the mean and the median of ds in nanoseconds.
func meanP50(ds []time.Duration) (mean, p50 float64) {
	if len(ds) == 0 {
		return 0, 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	slices.Sort(ds)
	return float64(sum.Nanoseconds()) / float64(len(ds)), float64(ds[len(ds)/2].Nanoseconds())
}

// BenchmarkVerifySession is a full three-round session (stream, hello,
// DefaultProbes probes, three rounds, attestation signing and checking, verdict)
// with an instant answerer.
func BenchmarkVerifySession(b *testing.B) {
	for _, tr := range transports {
		b.Run(tr, func(b *testing.B) {
			va, hb := benchPair(b, tr, DefaultProbes)
			cpu0 := testutil.ProcessCPU()
			for b.Loop() {
				verifyAccepted(b, va, hb)
			}
			// Both sides' CPU (verifier and prover run in this process).
			b.ReportMetric(float64((testutil.ProcessCPU()-cpu0).Microseconds())/1e3/float64(b.N), "cpu-ms/session")
		})
	}
}

package protocol

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol/pb"
)

// floorProtocol is the transport-floor benchmark's stand-in protocol.
const floorProtocol = "/acaptcha-bench/floor/1"

// floorAnswer answers a floor session's frames as an instant prover would
// (same frame kinds and sizes as the real protocol) with no acaptcha
// logic: no budgets, proof of work, reflection guard, answerer, judging
// or signatures.
func floorAnswer(s network.Stream) {
	defer s.Close()
	r := newFrameReader(s, MaxVerifierFrame)
	var f pb.Frame
	for {
		if err := readFrame(r, &f); err != nil {
			s.Reset()
			return
		}
		var out *pb.Frame
		switch b := f.GetBody().(type) {
		case *pb.Frame_Hello:
			out = &pb.Frame{Body: &pb.Frame_HelloAck{HelloAck: &pb.HelloAck{Nonce: b.Hello.GetNonce(), Pow: make([]byte, 8)}}}
		case *pb.Frame_Probe:
			out = &pb.Frame{Body: &pb.Frame_ProbeAck{ProbeAck: &pb.ProbeAck{Seq: b.Probe.GetSeq(), Nonce: b.Probe.GetNonce()}}}
		case *pb.Frame_Challenge:
			out = &pb.Frame{Body: &pb.Frame_Answer{Answer: &pb.Answer{Round: b.Challenge.GetRound(), Answer: "assay drift at the central lab"}}}
		default: // the verdict
			return
		}
		if err := writeFrame(s, out, MaxProverFrame); err != nil {
			return
		}
	}
}

// floorSession is one session's worth of streams and frames from a to b:
// a new stream, hello, DefaultProbes probes, three challenges of the
// given narratives, a verdict carrying an attestation-sized envelope.
func floorSession(ctx context.Context, a, b host.Host, narratives []string) error {
	s, err := a.NewStream(ctx, b.ID(), floorProtocol)
	if err != nil {
		return err
	}
	defer s.Close()
	r := newFrameReader(s, MaxProverFrame)
	var f pb.Frame
	exchange := func(out *pb.Frame) error {
		if err := writeFrame(s, out, MaxVerifierFrame); err != nil {
			return err
		}
		return readFrame(r, &f)
	}
	if err := exchange(&pb.Frame{Body: &pb.Frame_Hello{Hello: &pb.Hello{SpecVersion: SpecVersion,
		VerifierId: []byte(a.ID()), ProverId: []byte(b.ID()), Nonce: make([]byte, 32), Rounds: 3, TotalMs: 60000}}}); err != nil {
		return err
	}
	for i := range DefaultProbes {
		if err := exchange(&pb.Frame{Body: &pb.Frame_Probe{Probe: &pb.Probe{Seq: uint32(i), Nonce: make([]byte, probeNonceBytes)}}}); err != nil {
			return err
		}
	}
	for i, n := range narratives {
		if err := exchange(&pb.Frame{Body: &pb.Frame_Challenge{Challenge: &pb.Challenge{Round: uint32(i + 1), Rounds: 3, Domain: "clinical",
			Narrative: n, Question: "Which cause held up once the review had checked every lot?", BudgetMs: 30000}}}); err != nil {
			return err
		}
	}
	return writeFrame(s, &pb.Frame{Body: &pb.Frame_Verdict{Verdict: &pb.Verdict{Accepted: true, Attestation: make([]byte, 700)}}}, MaxVerifierFrame)
}

// BenchmarkTransportFloor is the ceiling of P2 on this machine: the
// streams and frames of mutual attestations (two sessions each, frames of
// a real session's kinds and sizes, narratives of about 3.6 KB as the
// procedural generator writes them) between 8 pairs of TCP hosts at
// once, with none of acaptcha's work. Compare its mutual/s and
// cpu-ms/mutual with peer's BenchmarkMutualAttestConcurrent.
//
//	go test -run '^$' -bench TransportFloor -benchtime 3000x ./protocol/
func BenchmarkTransportFloor(b *testing.B) {
	const pairs = 8
	hosts := make([]host.Host, 2*pairs)
	for i := range hosts {
		hosts[i] = newHost(b)
		hosts[i].SetStreamHandler(floorProtocol, floorAnswer)
	}
	for i := range pairs {
		connect(b, hosts[2*i], hosts[2*i+1], "tcp")
	}
	set := testSet("floor")
	var narratives []string
	for _, p := range set.Parts {
		narratives = append(narratives, strings.Repeat(p.Narrative, 2)[:3600])
	}
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		fail atomic.Pointer[error]
	)
	ctx := context.Background()
	cpu0, mcpu0 := testutil.ProcessCPU(), testutil.MachineCPU()
	reads0, writes0 := testutil.ProcessSyscalls()
	t0 := time.Now()
	b.ResetTimer()
	for i := range pairs {
		wg.Go(func() {
			x, y := hosts[2*i], hosts[2*i+1]
			for next.Add(1) <= int64(b.N) {
				for _, dir := range [2][2]host.Host{{x, y}, {y, x}} {
					if err := floorSession(ctx, dir[0], dir[1], narratives); err != nil {
						fail.Store(&err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if err := fail.Load(); err != nil {
		b.Fatal(*err)
	}
	b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "mutual/s")
	b.ReportMetric(float64((testutil.ProcessCPU()-cpu0).Microseconds())/1e3/float64(b.N), "cpu-ms/mutual")
	// The whole machine's busy CPU per attestation, kernel work on the
	// loopback connections charged to no process included (coarse: 10 ms
	// ticks, and anything else running counts).
	b.ReportMetric(float64((testutil.MachineCPU()-mcpu0).Microseconds())/1e3/float64(b.N), "machine-cpu-ms/mutual")
	reads1, writes1 := testutil.ProcessSyscalls()
	b.ReportMetric(float64(reads1-reads0)/float64(b.N), "reads/mutual")
	b.ReportMetric(float64(writes1-writes0)/float64(b.N), "writes/mutual")
}

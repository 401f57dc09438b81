package protocol

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"

	"github.com/acaptcha/acaptcha/protocol/pb"
)

const floorProto = "/zz-floor/1"

func floorHandler(s network.Stream) {
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
		case *pb.Frame_Verdict:
			return
		}
		if err := writeFrame(s, out, MaxProverFrame); err != nil {
			return
		}
	}
}

// one session-shaped exchange a -> b with no acaptcha logic.
func floorSession(ctx context.Context, a, b host.Host, narr []string) error {
	s, err := a.NewStream(ctx, b.ID(), floorProto)
	if err != nil {
		return err
	}
	defer s.Close()
	r := newFrameReader(s, MaxProverFrame)
	var f pb.Frame
	x := func(out *pb.Frame) error {
		if err := writeFrame(s, out, MaxVerifierFrame); err != nil {
			return err
		}
		return readFrame(r, &f)
	}
	if err := x(&pb.Frame{Body: &pb.Frame_Hello{Hello: &pb.Hello{SpecVersion: "1.2.0", VerifierId: make([]byte, 38), ProverId: make([]byte, 38), Nonce: make([]byte, 32), Rounds: 3, TotalMs: 60000, PowDifficulty: 12}}}); err != nil {
		return err
	}
	for i := range 3 {
		if err := x(&pb.Frame{Body: &pb.Frame_Probe{Probe: &pb.Probe{Seq: uint32(i), Nonce: make([]byte, 8)}}}); err != nil {
			return err
		}
	}
	for i := range 3 {
		if err := x(&pb.Frame{Body: &pb.Frame_Challenge{Challenge: &pb.Challenge{Round: uint32(i + 1), Rounds: 3, Domain: "clinical", Narrative: narr[i], Question: "Which cause held up once the review was done and the lots were checked?", BudgetMs: 30000}}}); err != nil {
			return err
		}
	}
	return writeFrame(s, &pb.Frame{Body: &pb.Frame_Verdict{Verdict: &pb.Verdict{Accepted: true, Detail: "ok", Attestation: make([]byte, 700)}}}, MaxVerifierFrame)
}

func BenchmarkZZFloor(b *testing.B) {
	const pairs = 8
	var hs []host.Host
	for range 2 * pairs {
		h := newHost(b)
		h.SetStreamHandler(floorProto, floorHandler)
		hs = append(hs, h)
	}
	for i := 0; i < pairs; i++ {
		connect(b, hs[2*i], hs[2*i+1], "tcp")
	}
	set := testSet("floor")
	narr := []string{set.Parts[0].Narrative + set.Parts[0].Narrative[:1000], set.Parts[1].Narrative + set.Parts[1].Narrative[:1000], set.Parts[2].Narrative + set.Parts[2].Narrative[:1000]}
	var next atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	b.ResetTimer()
	for i := range pairs {
		wg.Go(func() {
			a, c := hs[2*i], hs[2*i+1]
			for next.Add(1) <= int64(b.N) {
				if err := floorSession(context.Background(), a, c, narr); err != nil {
					b.Error(err)
					return
				}
				if err := floorSession(context.Background(), c, a, narr); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "mutual/s")
	_ = fmt.Sprint
}

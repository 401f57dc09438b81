package protocol

import (
	"bufio"
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/multiformats/go-varint"
	"google.golang.org/protobuf/proto"

	"github.com/acaptcha/acaptcha/protocol/pb"
	"github.com/acaptcha/acaptcha/skill"
)

// A prover that stops reading while a challenge is being written (its
// receive window full until the write deadline) is no slow answerer: the
// session ends protocol_error, not timeout (spec protocol.md §5 step 5).
// net.Pipe has no buffer, so the challenge's write blocks as soon as the
// prover stops reading; on a libp2p stream the window (256 KiB on yamux)
// hides this from any challenge the protocol allows.
func TestChallengeNotReadIsProtocolError(t *testing.T) {
	n := newFuzzNode(t)
	if !n.svc.enter() {
		t.Fatal("service closed")
	}
	defer n.svc.wg.Done()
	sess, err := skill.NewSession(n.set, n.svc.cfg.Policy, zeroReader{})
	if err != nil {
		t.Fatal(err)
	}
	local, remote := net.Pipe()
	defer local.Close()
	defer remote.Close()

	// The prover: pays the hello (zero nonce, no proof of work asked),
	// answers the probes, then reads no further once a challenge starts.
	var wg sync.WaitGroup
	defer wg.Wait()
	stalled := make(chan struct{})
	wg.Go(func() {
		// A small buffer: the prover reads a few bytes of the challenge
		// at most, so its write cannot complete.
		br := bufio.NewReaderSize(remote, 16)
		var f pb.Frame
		for {
			n, err := varint.ReadUvarint(br)
			if err != nil {
				return
			}
			if n > 1024 { // a challenge (hello and probes are short)
				close(stalled)
				return
			}
			buf := make([]byte, n)
			if _, err := io.ReadFull(br, buf); err != nil {
				return
			}
			if err := proto.Unmarshal(buf, &f); err != nil {
				return
			}
			var out *pb.Frame
			switch b := f.GetBody().(type) {
			case *pb.Frame_Hello:
				out = &pb.Frame{Body: &pb.Frame_HelloAck{HelloAck: &pb.HelloAck{Nonce: b.Hello.GetNonce()}}}
			case *pb.Frame_Probe:
				out = &pb.Frame{Body: &pb.Frame_ProbeAck{ProbeAck: &pb.ProbeAck{Seq: b.Probe.GetSeq(), Nonce: b.Probe.GetNonce()}}}
			default:
				return
			}
			if err := writeFrame(remote, out, MaxProverFrame); err != nil {
				return
			}
		}
	})

	r := &Result{Peer: n.remote, Started: time.Now(), Nonce: make([]byte, NonceBytes)}
	vs := &VerifierSession{svc: n.svc, peer: n.remote, sess: sess, res: r, rtt: -1}
	v := &verifierRun{svc: n.svc, vs: vs, str: pipeStream{local}, peer: n.remote, ctx: context.Background(), log: n.svc.log, res: r}
	done := make(chan struct{})
	var (
		res  *Result
		verr error
	)
	go func() {
		defer close(done)
		res, verr = v.run()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("session did not end")
	}
	local.Close()
	remote.Close()
	select {
	case <-stalled:
	default:
		t.Fatal("the prover never saw a challenge start")
	}
	if verr != nil {
		t.Fatalf("session error: %v", verr)
	}
	if got := res.Verdict.Reason; got != skill.ReasonProtocolError {
		t.Fatalf("reason %q (%s), want %q", got, res.Verdict.Detail, skill.ReasonProtocolError)
	}
	if res.Verdict.FailedRound != 1 || res.Attestation == nil {
		t.Fatalf("verdict %+v (attested %v): want a signed rejection in round 1", res.Verdict, res.Attestation != nil)
	}
}

// A verifier configured for many probes stops probing once two more of
// its fastest round trips would end past the handshake timeout from its
// first probe: a prover
// waits for round 1 at most that long after the first probe (spec §6
// step 5), so a slow link must not turn the verifier's probes into the
// prover's timeout.
func TestProbesStopWithinHandshakeTimeout(t *testing.T) {
	n := newFuzzNode(t)
	n.svc.cfg.Probes = MaxProbes
	const ackDelay = 40 * time.Millisecond // HandshakeTimeout is 200 ms
	if !n.svc.enter() {
		t.Fatal("service closed")
	}
	defer n.svc.wg.Done()
	sess, err := skill.NewSession(n.set, n.svc.cfg.Policy, zeroReader{})
	if err != nil {
		t.Fatal(err)
	}
	local, remote := net.Pipe()
	defer local.Close()
	defer remote.Close()
	var (
		wg          sync.WaitGroup
		probes      int
		firstProbe  time.Time
		challengeAt time.Time
	)
	wg.Go(func() {
		br := bufio.NewReader(remote)
		var f pb.Frame
		for {
			n, err := varint.ReadUvarint(br)
			if err != nil {
				return
			}
			if n > 1024 { // round 1's challenge
				challengeAt = time.Now()
				remote.Close()
				return
			}
			buf := make([]byte, n)
			if _, err := io.ReadFull(br, buf); err != nil {
				return
			}
			if err := proto.Unmarshal(buf, &f); err != nil {
				return
			}
			var out *pb.Frame
			switch b := f.GetBody().(type) {
			case *pb.Frame_Hello:
				out = &pb.Frame{Body: &pb.Frame_HelloAck{HelloAck: &pb.HelloAck{Nonce: b.Hello.GetNonce()}}}
			case *pb.Frame_Probe:
				if probes++; probes == 1 {
					firstProbe = time.Now()
				}
				time.Sleep(ackDelay)
				out = &pb.Frame{Body: &pb.Frame_ProbeAck{ProbeAck: &pb.ProbeAck{Seq: b.Probe.GetSeq(), Nonce: b.Probe.GetNonce()}}}
			default:
				return
			}
			if err := writeFrame(remote, out, MaxProverFrame); err != nil {
				return
			}
		}
	})
	r := &Result{Peer: n.remote, Started: time.Now(), Nonce: make([]byte, NonceBytes)}
	vs := &VerifierSession{svc: n.svc, peer: n.remote, sess: sess, res: r, rtt: -1}
	v := &verifierRun{svc: n.svc, vs: vs, str: pipeStream{local}, peer: n.remote, ctx: context.Background(), log: n.svc.log, res: r}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = v.run()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("session did not end")
	}
	local.Close()
	wg.Wait()
	if challengeAt.IsZero() {
		t.Fatalf("no round 1 after %d probes", probes)
	}
	// At 40 ms a round trip, 4 probes and two round trips fit in 200 ms
	// (fewer on a slow machine); all 16 took 646 ms.
	if probes < 1 || probes > 4 {
		t.Errorf("%d probes, want 1 to 4", probes)
	}
	if d := challengeAt.Sub(firstProbe); d > n.svc.cfg.HandshakeTimeout {
		t.Errorf("round 1 came %v after the first probe, past the handshake timeout %v", d, n.svc.cfg.HandshakeTimeout)
	}
}

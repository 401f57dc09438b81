package secondimpl2

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"sync"
	"time"

	lcrypto "github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
)

const protoID = "/acaptcha/attest/1.0.0"

// stream error codes (protocol.md §8)
const (
	codePV        network.StreamErrorCode = 0xAC100001
	codeOversized network.StreamErrorCode = 0xAC100002
	codeTimeout   network.StreamErrorCode = 0xAC100003
	codeReflect   network.StreamErrorCode = 0xAC100004
	codeBusy      network.StreamErrorCode = 0xAC100005
	codeDeclined  network.StreamErrorCode = 0xAC100006
)

// decline reasons
const (
	drBusy        = 2
	drBadHello    = 3
	drVersion     = 4
	drProverError = 5
	drReflection  = 7
	drKind        = 8
	drVerifyFirst = 9
)

// Reciprocal values (protocol.md §1a)
const (
	reciprocalWill       = 1
	reciprocalAttested   = 2
	reciprocalBackingOff = 3
	reciprocalBusy       = 4
	reciprocalNotOffered = 5
)

const (
	handshakeTimeout = 10 * time.Second
	helloTimeout     = 3 * time.Second
	probeTimeout     = 5 * time.Second
	idleTimeout      = 45 * time.Second
	readGrace        = 250 * time.Millisecond
	maxOwnPow        = 22
	// pathAllowance is P of §5a: the verifier waits for the ack the
	// handshake timeout plus P from writing the hello, and its
	// obligations counted from reading a prover's frame are the prover's
	// waits less P (§6 step 5).
	pathAllowance = 2 * time.Second
	// round1Window: round 1 (or the Verdict) is written within the
	// handshake timeout less P of writing the first probe (§5 step 4).
	round1Window = handshakeTimeout - pathAllowance
)

var logf = func(format string, args ...any) {
	if os.Getenv("SECONDIMPL2_LOG") != "" {
		fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05.000 ")+format+"\n", args...)
	}
}

func writeFrame(s network.Stream, f *frame) error {
	s.SetWriteDeadline(time.Now().Add(handshakeTimeout))
	_, err := s.Write(encodeFrame(f))
	return err
}

func remoteCode(err error) (network.StreamErrorCode, bool) {
	var se *network.StreamError
	if errors.As(err, &se) && se.Remote {
		return se.ErrorCode, true
	}
	return 0, false
}

func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// node is one side of this implementation: a libp2p host, its Ed25519
// key, a prover and a verifier.
type node struct {
	h    host.Host
	priv ed25519.PrivateKey
	id   []byte

	mu     sync.Mutex
	issued []issuedChallenge // reflection memory (protocol.md §7)

	prover proverOpts
	// results of the sessions this node answered as prover
	proved chan *proverResult
	// sessions back started on a reciprocal request
	back chan *verifierResult
	// verifier options for sessions back
	backOpts verifierOpts
	// acceptedUntil: this node's own standing acceptances (its verifier
	// signed ok, until the record expires); backRunning: its sessions back
	// running (§1a.3, §5c). Under mu.
	acceptedUntil map[lpeer.ID]time.Time
	backRunning   map[lpeer.ID]bool
}

type issuedChallenge struct {
	digest [32]byte
	sketch []uint64
	at     time.Time
}

func newNode(h host.Host, key lcrypto.PrivKey) *node {
	raw, err := key.Raw()
	if err != nil {
		panic(err)
	}
	n := &node{h: h, priv: ed25519.PrivateKey(raw), id: []byte(h.ID()),
		proved: make(chan *proverResult, 64), back: make(chan *verifierResult, 64),
		acceptedUntil: map[lpeer.ID]time.Time{}, backRunning: map[lpeer.ID]bool{}}
	h.SetStreamHandler(protoID, n.handleProver)
	return n
}

func (n *node) remember(c *challenge) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.issued = append(n.issued, issuedChallenge{reflDigest(c.Narrative, c.Question), sketch(c.Narrative, c.Question), time.Now()})
}

func (n *node) isOwn(c *challenge) bool {
	d, sk := reflDigest(c.Narrative, c.Question), sketch(c.Narrative, c.Question)
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, ic := range n.issued {
		if time.Since(ic.at) > 10*time.Minute {
			continue
		}
		if ic.digest == d || jaccard(ic.sketch, sk) >= 0.5 {
			return true
		}
	}
	return false
}

// ---------------------------------------------------------------- prover

type proverOpts struct {
	// answer is the brain (a test oracle); nil: this node has no prover.
	answer func(c *challenge) (string, error)
	// pace: how long after reading the hello the ack is written (0: at
	// once), and how long after reading a challenge the answer is.
	ackAfter    time.Duration
	answerAfter func(c *challenge) time.Duration
	// helloLate: the handler reads the hello this long after the stream
	// reached it (a scheduler delay; the hello waits in the buffer).
	helloLate time.Duration
	// reciprocal answer when asked and no session back is started
	reciprocal int32
	// verifyBack: answer WILL and start a session back.
	verifyBack bool
	// payDifficulty is D_v, the payment asked of a verifier that came to
	// this node (the stream's connection is inbound here; §5b's intended
	// use); payAlways asks it of every verifier (to test a verifier's
	// refusal); ackHook edits the ack before it is written (malformed
	// asks).
	payDifficulty uint32
	payAlways     bool
	ackHook       func(a *helloAck)
	// verifyFirst (§5c): a verifier that came to this node (the stream's
	// connection is inbound here) is answered only once admits says so
	// or this node's own acceptance of it stands; until then its hello
	// is declined VERIFY_FIRST with the reciprocal answer (WILL with
	// verifyBack: a session back is started or runs). admits is the
	// node's trust (nil: it admits nobody).
	verifyFirst bool
	admits      func(p lpeer.ID) bool
	// probeAckAfter delays the ack of probe seq this long after reading
	// it (a slow path); probeReply, when it returns a frame, sends that
	// instead of the ack (then lingers and resets ErrCodeDeclined, as
	// after a decline): a prover breaking the protocol on purpose.
	probeAckAfter func(seq uint32) time.Duration
	probeReply    func(pr *probe) *frame
}

type proverResult struct {
	verifier   lpeer.ID
	verdict    *verdict
	record     *attRecord
	recordErr  error
	err        error
	answered   int
	ackWritten time.Time
	// firstFrame is when the verifier's first frame after the ack was read.
	firstFrame time.Time
	// payAsked is the D_v the ack asked (§5b); unpaid is set when the
	// verifier's first frame after it did not pay (Decline{BUSY} sent).
	payAsked uint32
	unpaid   bool
	// verifyFirst is set when the hello was declined VERIFY_FIRST (§5c),
	// with declineReciprocal the decline's field 3; lingerErr is how the
	// linger after a decline ended (the verifier's reset, its code).
	verifyFirst       bool
	declineReciprocal int32
	lingerErr         error
	// round1Read is when round 1 was read.
	round1Read time.Time
}

func (n *node) handleProver(s network.Stream) {
	res := &proverResult{verifier: s.Conn().RemotePeer()}
	defer func() { n.proved <- res }()
	res.err = n.prove(s, res)
	if res.err != nil {
		logf("prover: %v", res.err)
	}
}

// linger: write the decline, half-close, wait up to d for the verifier to
// close (reading and discarding), then reset with code (protocol.md §6
// step 2).
func linger(s network.Stream, r *bufio.Reader, d time.Duration, code network.StreamErrorCode) error {
	s.CloseWrite()
	s.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, io.LimitReader(r, 1<<16))
	s.ResetWithError(code)
	return err
}

// standing: this node admits p or its own acceptance of p stands (§5c).
func (n *node) standing(p lpeer.ID) (admitted, accepted bool) {
	if n.prover.admits != nil && n.prover.admits(p) {
		admitted = true
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return admitted, n.acceptedUntil[p].After(time.Now())
}

// reciprocalFor decides the answer to a request to verify p back
// (§1a.3), for a hello asking it or a VERIFY_FIRST decline (§5c): WILL
// while a session of this node's to p runs (no second one); else
// ATTESTED while its own acceptance of p stands; else, with verifyBack,
// WILL and a session back started; else the configured answer.
func (n *node) reciprocalFor(p lpeer.ID) int32 {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.backRunning[p]:
		return reciprocalWill
	case n.acceptedUntil[p].After(time.Now()):
		return reciprocalAttested
	case n.prover.verifyBack:
		n.backRunning[p] = true
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			vr := n.verify(ctx, p, n.backOpts)
			n.mu.Lock()
			delete(n.backRunning, p)
			n.mu.Unlock()
			n.back <- vr
		}()
		return reciprocalWill
	}
	return n.prover.reciprocal
}

func (n *node) prove(s network.Stream, res *proverResult) error {
	r := bufio.NewReader(s)
	if n.prover.helloLate > 0 {
		time.Sleep(n.prover.helloLate)
	}
	s.SetReadDeadline(time.Now().Add(helloTimeout))
	f, err := readFrame(r, capVerifier)
	if err != nil {
		if errors.Is(err, errOversized) {
			s.ResetWithError(codeOversized)
		} else if isTimeout(err) {
			s.ResetWithError(codeTimeout)
		} else {
			s.ResetWithError(codePV)
		}
		return fmt.Errorf("hello: %w", err)
	}
	helloRead := time.Now()
	if f.Body != bHello {
		s.ResetWithError(codePV)
		return errors.New("first frame is not a hello")
	}
	h := f.Hello
	decl := func(reason int32, detail string, code network.StreamErrorCode) error {
		writeFrame(s, &frame{Body: bDecline, Decline: &decline{Reason: reason, Detail: detail}})
		d := time.Second
		if reason == drBusy {
			d = 500 * time.Millisecond
		}
		res.lingerErr = linger(s, r, d, code)
		return fmt.Errorf("declined %d: %s", reason, detail)
	}
	if maj, ok := specMajor(h.SpecVersion); !ok || maj != 1 {
		return decl(drVersion, "version", codeDeclined)
	}
	switch {
	case !bytes.Equal(h.VerifierID, []byte(s.Conn().RemotePeer())), !bytes.Equal(h.ProverID, n.id),
		len(h.Nonce) != 32, h.Rounds < 1 || h.Rounds > 3, h.TotalMs < 1 || h.TotalMs > 3_600_000,
		h.TotalMs > 300_000, h.PowDifficulty > 32, h.TauMs > h.TotalMs, h.RTTCreditMs > h.TotalMs:
		return decl(drBadHello, "bad hello", codePV)
	}
	if n.prover.answer == nil {
		writeFrame(s, &frame{Body: bDecline, Decline: &decline{Reason: 1, Detail: "no prover"}})
		s.Close()
		return errors.New("no prover")
	}
	// §5c: after the hello's own checks, before any budget or work, a
	// verifier that came to this node and that it neither admits nor has
	// accepted is declined VERIFY_FIRST, with the reciprocal answer as
	// for a hello asking to be verified back; linger and reset
	// ErrCodeDeclined as after any decline at the hello. Nothing signed.
	verifier := s.Conn().RemotePeer()
	came := s.Conn().Stat().Direction == network.DirInbound
	if n.prover.verifyFirst && came {
		if admitted, accepted := n.standing(verifier); !admitted && !accepted {
			rec := n.reciprocalFor(verifier)
			if rec == 0 {
				rec = reciprocalNotOffered
			}
			res.verifyFirst, res.declineReciprocal = true, rec
			writeFrame(s, &frame{Body: bDecline, Decline: &decline{Reason: drVerifyFirst,
				Detail: "verifying you first; ask again after the verdict", Reciprocal: rec}})
			res.lingerErr = linger(s, r, time.Second, codeDeclined)
			return fmt.Errorf("declined VERIFY_FIRST, reciprocal %d", rec)
		}
	}
	var pow []byte
	if h.PowDifficulty > maxOwnPow {
		return decl(drBusy, "proof of work too hard", codeBusy)
	}
	if h.PowDifficulty > 0 {
		pow = solvePow(h.Nonce, n.id, int(h.PowDifficulty))
	}
	ack := &helloAck{Nonce: h.Nonce, Pow: pow}
	// §5b's intended use: ask a verifier that came and that this node
	// does not admit; a verify-first prover answers none such (§5c), so
	// it asks none.
	if d := n.prover.payDifficulty; d > 0 && (n.prover.payAlways || (came && !n.prover.verifyFirst)) {
		ack.PayDifficulty, ack.PayNonce = d, randBytes(payNonceLen)
	}
	if n.prover.ackHook != nil {
		n.prover.ackHook(ack)
	}
	res.payAsked = ack.PayDifficulty
	if h.Reciprocal {
		ack.Reciprocal = n.reciprocalFor(verifier)
	}
	if d := n.prover.ackAfter - time.Since(helloRead); d > 0 {
		time.Sleep(d)
	}
	if err := writeFrame(s, &frame{Body: bHelloAck, HelloAck: ack}); err != nil {
		return err
	}
	res.ackWritten = time.Now()
	logf("prover: ack written %v after reading the hello", res.ackWritten.Sub(helloRead))

	// Deadlines of §6 step 5.
	total := time.Duration(h.TotalMs) * time.Millisecond
	credit := time.Duration(h.RTTCreditMs) * time.Millisecond
	I := min(idleTimeout, total+10*time.Second)
	sessionEnd := res.ackWritten.Add(idleTimeout + total + 20*time.Second)
	lastWrite := res.ackWritten
	var firstAfterAck time.Time
	round1 := false
	afterAnswer := false
	probes := 0
	var kind string
	var round uint32
	for {
		dl := lastWrite.Add(I)
		if afterAnswer {
			dl = lastWrite.Add(min(I, handshakeTimeout))
		}
		if !round1 && !firstAfterAck.IsZero() {
			dl = minTime(dl, firstAfterAck.Add(handshakeTimeout))
		}
		dl = minTime(dl, sessionEnd)
		s.SetReadDeadline(dl)
		f, err := readFrame(r, capVerifier)
		if err != nil {
			switch {
			case errors.Is(err, errOversized):
				s.ResetWithError(codeOversized)
			case isTimeout(err):
				s.ResetWithError(codeTimeout)
				return fmt.Errorf("timeout waiting for the verifier (deadline %v after the last write)", dl.Sub(lastWrite))
			case errors.Is(err, errDecode), errors.Is(err, errPrefix):
				s.ResetWithError(codePV)
			default:
				s.Reset()
			}
			return err
		}
		if firstAfterAck.IsZero() {
			firstAfterAck = time.Now()
			res.firstFrame = firstAfterAck
			// §5b, §6 step 5: an asked payment is checked first: a Probe
			// whose pay is valid, or a Verdict; anything else is BUSY.
			if d := int(ack.PayDifficulty); d > 0 {
				paid := f.Body == bVerdict ||
					(f.Body == bProbe && payValid(ack.PayNonce, h.VerifierID, f.Probe.Pay, d))
				if !paid {
					res.unpaid = true
					return decl(drBusy, fmt.Sprintf("payment of %d bits asked", d), codeBusy)
				}
			}
		}
		switch f.Body {
		case bProbe:
			probes++
			if round1 || probes > 16 || len(f.Probe.Nonce) > 32 {
				s.ResetWithError(codePV)
				return errors.New("probe out of order")
			}
			if n.prover.probeReply != nil {
				if rf := n.prover.probeReply(f.Probe); rf != nil {
					writeFrame(s, rf)
					res.lingerErr = linger(s, r, time.Second, codeDeclined)
					return fmt.Errorf("probe %d answered with frame %d on purpose", f.Probe.Seq, rf.Body)
				}
			}
			if n.prover.probeAckAfter != nil {
				time.Sleep(n.prover.probeAckAfter(f.Probe.Seq))
			}
			if err := writeFrame(s, &frame{Body: bProbeAck, Probe: f.Probe}); err != nil {
				return err
			}
			lastWrite = time.Now()
		case bChallenge:
			c := f.Challenge
			k := c.Kind
			if k == "" {
				k = "narrative"
			}
			if c.Round != round+1 || c.Rounds != h.Rounds || c.BudgetMs < 1 || c.BudgetMs > h.TotalMs ||
				len(c.Domain) > 256 || len(c.Narrative) < 1 || len(c.Narrative) > 32768 ||
				len(c.Question) < 1 || len(c.Question) > 2048 || (c.Kind != "" && !kindOK(c.Kind)) ||
				(round > 0 && k != kind) {
				s.ResetWithError(codePV)
				return fmt.Errorf("bad challenge %+v", c)
			}
			readAt := time.Now()
			if !round1 {
				res.round1Read = readAt
			}
			round, kind, round1 = c.Round, k, true
			if n.isOwn(c) {
				return decl(drReflection, "a challenge this node issued", codeReflect)
			}
			if k != "narrative" {
				if err := writeFrame(s, &frame{Body: bDecline, Decline: &decline{Reason: drKind, Detail: "kind " + k}}); err != nil {
					return err
				}
				lastWrite, afterAnswer = time.Now(), true
				continue
			}
			if n.prover.answerAfter != nil {
				if d := n.prover.answerAfter(c) - time.Since(readAt); d > 0 {
					time.Sleep(d)
				}
			}
			ans, aerr := n.prover.answer(c)
			budget := time.Duration(c.BudgetMs) * time.Millisecond
			switch {
			case time.Since(readAt) > budget+credit+time.Second:
				// abandoned: silent
			case aerr != nil:
				if err := writeFrame(s, &frame{Body: bDecline, Decline: &decline{Reason: drProverError, Detail: "answerer failed"}}); err != nil {
					return err
				}
			default:
				if err := writeFrame(s, &frame{Body: bAnswer, Answer: &answer{Round: c.Round, Answer: cutAnswer(ans)}}); err != nil {
					return err
				}
				res.answered++
			}
			lastWrite, afterAnswer = time.Now(), true
		case bVerdict:
			v := f.Verdict
			res.verdict = v
			okReasons := map[string]bool{"ok": true, "wrong_answer": true, "timeout": true, "total_timeout": true,
				"protocol_error": true, "declined": true, "inconclusive": true}
			if !okReasons[v.Reason] || v.Accepted != (v.Reason == "ok") || v.FailedRound > 3 || (v.Accepted && v.FailedRound != 0) {
				s.Close()
				return errors.New("verdict breaks the consistency rule")
			}
			if len(v.Attestation) == 0 {
				if v.Reason != "inconclusive" {
					res.recordErr = errors.New("no attestation")
				}
			} else {
				rec, err := verifyAttestation(v.Attestation, verifyOpts{Subject: n.id, Issuer: []byte(s.Conn().RemotePeer()), Now: time.Now().Unix()})
				switch {
				case err != nil:
					res.recordErr = err
				case !bytes.Equal(rec.Nonce, h.Nonce) || rec.Accepted != v.Accepted || rec.Reason != v.Reason || rec.FailedRound != v.FailedRound:
					res.recordErr = errors.New("record differs from the verdict frame")
				default:
					res.record = rec
				}
			}
			s.Close()
			return nil
		default:
			s.ResetWithError(codePV)
			return fmt.Errorf("unexpected frame %d", f.Body)
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// -------------------------------------------------------------- verifier

type verifierOpts struct {
	rounds                   int
	tauMs, totalMs, creditMs uint32
	pow                      uint32
	reciprocal               bool
	probes                   int
	source                   func() *specSet
	// pace (0: at once): after the ack before the first probe, after the
	// first probe's write before round 1, after reading an answer before
	// the next frame; readLate delays reading each answer (it waits in
	// the buffer).
	probeAfter, round1After, nextAfter, readLate time.Duration
	// provenance is the source the records name (attestation.md §3.1;
	// "" is procedural, what this implementation's sets are).
	provenance string
	// maxPay is the most this verifier pays a prover that asks (§5b; 0:
	// maxOwnPay, 22 bits). noPay reads no ask and pays nothing, as a
	// verifier before document 1.13.0 (it decodes no field 4 or 5).
	// wrongPay sends the first counter value after the solution that
	// does not pay (an invalid payment).
	maxPay   uint32
	noPay    bool
	wrongPay bool
}

type verifierResult struct {
	peer       lpeer.ID
	noSession  error // set when no session ran (nothing signed)
	accepted   bool
	reason     string
	failed     int
	rounds     []attRound
	envelope   []byte
	reciprocal int32
	credit     time.Duration
	transcript []tRound
	// payAsked is the prover's D_v (§5b); paid the pay sent in probe 1;
	// busyDecline is set when the prover answered a probe Decline{BUSY}.
	payAsked    uint32
	paid        []byte
	payNonce    []byte
	busyDecline bool
	// verifyFirst: the prover declined the hello VERIFY_FIRST (§5c); no
	// session ran and reciprocal is the decline's field 3.
	verifyFirst bool
	// firstProbe is when the first probe's write returned, round1 when
	// round 1's write began.
	firstProbe, round1 time.Time
}

var (
	errBusy         = errors.New("busy")
	errDeclinedHell = errors.New("declined at the hello")
	errUnpaid       = errors.New("unpaid")
	errUnresponsive = errors.New("unresponsive")
	errNetwork      = errors.New("network failure")
	// errPayRefused: the prover asked a payment this verifier does not
	// pay (above its maximum, or the prover opened the connection; §5b).
	errPayRefused = errors.New("payment asked not paid")
	// errVerifyFirst: the prover answers this verifier only once it
	// admits it (§5c); also errDeclinedHell (a decline at the hello).
	errVerifyFirst = errors.New("verify first")
)

func randBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func randIntn(n int) int {
	v, _ := rand.Int(rand.Reader, big.NewInt(int64(n)))
	return int(v.Int64())
}

func (n *node) verify(ctx context.Context, p lpeer.ID, o verifierOpts) *verifierResult {
	res := &verifierResult{peer: p}
	s, err := n.h.NewStream(ctx, p, protoID)
	if err != nil {
		res.noSession = fmt.Errorf("%w: %v", errNetwork, err)
		return res
	}
	stop := context.AfterFunc(ctx, func() { s.Reset() })
	defer stop()
	r := bufio.NewReader(s)
	h := &hello{SpecVersion: "1.0.0", VerifierID: n.id, ProverID: []byte(p), Nonce: randBytes(32),
		Rounds: uint32(o.rounds), TauMs: o.tauMs, TotalMs: o.totalMs, Reciprocal: o.reciprocal,
		RTTCreditMs: o.creditMs, PowDifficulty: o.pow}
	if err := writeFrame(s, &frame{Body: bHello, Hello: h}); err != nil {
		s.Reset()
		res.noSession = fmt.Errorf("%w: %v", errNetwork, err)
		return res
	}
	// §5a: the handshake timeout plus the path allowance P from writing
	// the hello, plus 50 ms · 2^(D−16) when D ≥ 17.
	wait := handshakeTimeout + pathAllowance
	if o.pow > 16 {
		wait += 50 * time.Millisecond << (o.pow - 16)
	}
	s.SetReadDeadline(time.Now().Add(wait))
	f, err := readFrame(r, capProver)
	if err != nil {
		switch code, remote := remoteCode(err); {
		case remote && code == codeBusy:
			res.noSession = errBusy
		case remote && (code == codeDeclined || code == codeReflect || code == codePV || code == codeOversized):
			res.noSession = errDeclinedHell
		case errors.Is(err, errOversized):
			s.ResetWithError(codeOversized)
			res.noSession = errUnpaid
		case errors.Is(err, errDecode), errors.Is(err, errPrefix):
			s.ResetWithError(codePV)
			res.noSession = errUnpaid
		case isTimeout(err):
			s.Reset()
			res.noSession = errUnresponsive
		default:
			s.Reset()
			res.noSession = fmt.Errorf("%w: %v", errNetwork, err)
		}
		return res
	}
	ackRead := time.Now()
	switch {
	case f.Body == bDecline && f.Decline.Reason == drBusy:
		s.Reset()
		res.noSession = errBusy
		return res
	case f.Body == bDecline && f.Decline.Reason == drVerifyFirst:
		// §5c: no session ran, nothing drawn or signed; reset as after
		// any decline at the hello. The reciprocal says whether the
		// prover verifies this node now (WILL) or why not.
		s.ResetWithError(codeDeclined)
		res.verifyFirst, res.reciprocal = true, f.Decline.Reciprocal
		res.noSession = fmt.Errorf("%w: %w: reciprocal %d: %s", errDeclinedHell, errVerifyFirst, f.Decline.Reciprocal, f.Decline.Detail)
		return res
	case f.Body == bDecline:
		s.ResetWithError(codeDeclined)
		res.noSession = fmt.Errorf("%w: %d %s", errDeclinedHell, f.Decline.Reason, f.Decline.Detail)
		return res
	case f.Body != bHelloAck || !bytes.Equal(f.HelloAck.Nonce, h.Nonce):
		s.ResetWithError(codePV)
		res.noSession = errUnpaid
		return res
	case !powValid(h.Nonce, []byte(p), f.HelloAck.Pow, int(o.pow)):
		s.ResetWithError(codeDeclined)
		res.noSession = errUnpaid
		return res
	}
	res.reciprocal = f.HelloAck.Reciprocal
	// The payment asked (§5b, §5 step 3), solved before the set is drawn.
	var pay []byte
	if a := f.HelloAck; !o.noPay {
		res.payAsked = a.PayDifficulty
		if askMalformed(a) {
			// as an ack with a wrong nonce: no session, nothing signed
			s.ResetWithError(codePV)
			res.noSession = fmt.Errorf("%w: malformed payment ask (D_v %d, nonce of %d bytes)", errUnpaid, a.PayDifficulty, len(a.PayNonce))
			return res
		}
		if d := a.PayDifficulty; d > 0 {
			if d > cmp.Or(o.maxPay, maxOwnPay) || s.Conn().Stat().Direction == network.DirInbound {
				s.ResetWithError(codeBusy)
				res.noSession = fmt.Errorf("%w: %d bits, connection %v", errPayRefused, d, s.Conn().Stat().Direction)
				return res
			}
			// within the first-frame deadline of §6 step 5, I - P from
			// reading the ack, less a second for the probe's write
			I := min(idleTimeout, time.Duration(o.totalMs)*time.Millisecond+10*time.Second)
			sctx, cancel := context.WithDeadline(ctx, ackRead.Add(I-pathAllowance-time.Second))
			pay = solvePay(sctx, a.PayNonce, n.id, int(d))
			cancel()
			if pay == nil {
				s.ResetWithError(codeBusy)
				res.noSession = fmt.Errorf("%w: %d bits not solved in time", errPayRefused, d)
				return res
			}
			for o.wrongPay && payValid(a.PayNonce, n.id, pay, int(d)) {
				pay = binary.BigEndian.AppendUint64(nil, binary.BigEndian.Uint64(pay)+1)
			}
			res.paid, res.payNonce = pay, a.PayNonce
		}
	}
	// Draw the set after the paid ack (and the payment), one question per part.
	set := o.source()
	type pick struct {
		part *specPart
		q    *specQuestion
	}
	var picks []pick
	for i := 0; i < o.rounds; i++ {
		part := &set.Parts[i]
		picks = append(picks, pick{part, &part.Questions[randIntn(len(part.Questions))]})
	}
	budget := time.Duration(o.tauMs) * time.Millisecond
	total := time.Duration(o.totalMs) * time.Millisecond
	capCredit := time.Duration(o.creditMs) * time.Millisecond

	sign := func(accepted bool, reason string, rounds []attRound, tr []tRound) []byte {
		now := time.Now().Unix()
		rec := &attRecord{Issuer: n.id, Subject: []byte(p), Accepted: accepted, Reason: reason,
			Nonce: h.Nonce, Digest: transcriptDigest("", tr), Rounds: rounds,
			Policy:   attPolicy{Rounds: uint32(o.rounds), TauMs: uint64(o.tauMs), TotalMs: uint64(o.totalMs), RTTCreditMs: uint64(o.creditMs)},
			IssuedAt: now, ExpiresAt: now + 86400, SpecVersion: "1.0.0",
			Provenance: attProvenance{Source: cmp.Or(o.provenance, "procedural")}}
		if !accepted {
			rec.FailedRound = uint32(max(len(rounds), 1))
		}
		if len(rounds) > 0 {
			rec.Domain, rec.SetID = set.Domain, setID(set)
		}
		return sealRecord(rec, n.priv)
	}
	sendVerdict := func(accepted bool, reason string, rounds []attRound, elapsed []time.Duration, tr []tRound, resetCode network.StreamErrorCode, credit time.Duration) *verifierResult {
		env := sign(accepted, reason, rounds, tr)
		if accepted {
			// a standing acceptance of p (§5c), counted before the verdict
			// is written: the prover may ask again as soon as it reads it
			n.mu.Lock()
			n.acceptedUntil[p] = time.Now().Add(86400 * time.Second)
			n.mu.Unlock()
		}
		v := &verdict{Accepted: accepted, Reason: reason, Attestation: env}
		if !accepted {
			v.FailedRound = uint32(max(len(rounds), 1))
		}
		for i, x := range rounds {
			v.Rounds = append(v.Rounds, roundResult{Round: x.Round, BudgetMs: uint32(x.BudgetMs),
				EffectiveMs: uint32(x.EffectiveMs), Correct: x.Correct, ElapsedMs: uint32(elapsed[i] / time.Millisecond)})
		}
		werr := writeFrame(s, &frame{Body: bVerdict, Verdict: v})
		if resetCode != 0 {
			s.ResetWithError(resetCode)
		} else if werr == nil {
			s.CloseWrite()
			s.SetReadDeadline(time.Now().Add(2*time.Second + capCredit))
			_, err := io.Copy(io.Discard, io.LimitReader(r, 4096))
			if err != nil {
				s.ResetWithError(codeTimeout)
			} else {
				s.Close()
			}
		}
		res.accepted, res.reason, res.failed, res.rounds, res.envelope = accepted, reason, int(v.FailedRound), rounds, env
		res.transcript, res.credit = tr, credit
		return res
	}

	// RTT probes (§5 step 4).
	if o.probeAfter > 0 {
		time.Sleep(o.probeAfter)
	}
	probes := max(o.probes, 1)
	rtt := time.Duration(-1)
	var firstProbe time.Time
	for seq := 1; seq <= probes; seq++ {
		pr := &probe{Seq: uint32(seq), Nonce: randBytes(8)}
		if seq == 1 {
			pr.Pay = pay
		}
		if err := writeFrame(s, &frame{Body: bProbe, Probe: pr}); err != nil {
			s.Reset()
			res.noSession = fmt.Errorf("%w: %v", errNetwork, err)
			return res
		}
		t0 := time.Now()
		if seq == 1 {
			firstProbe, res.firstProbe = t0, t0
		}
		// the probe timeout, cut to the round-1 window (§5 step 4): an
		// ack not read by its end is no reply
		s.SetReadDeadline(minTime(t0.Add(probeTimeout), firstProbe.Add(round1Window)))
		f, err := readFrame(r, capProver)
		if err != nil {
			code, remote := remoteCode(err)
			switch {
			case remote && code == codeBusy:
				res.noSession = errBusy
				return res
			case remote && (code == codeDeclined || code == codeReflect || code == codePV || code == codeOversized):
				return sendVerdict(false, "declined", nil, nil, nil, 0, 0)
			case errors.Is(err, errOversized):
				return sendVerdict(false, "protocol_error", nil, nil, nil, codeOversized, 0)
			case errors.Is(err, errDecode), errors.Is(err, errPrefix):
				return sendVerdict(false, "protocol_error", nil, nil, nil, codePV, 0)
			}
			s.Reset()
			if isTimeout(err) {
				// no reply within the probe timeout or the round-1 window
				res.noSession = fmt.Errorf("%w: probe %d: %v", errUnresponsive, seq, err)
			} else {
				res.noSession = fmt.Errorf("%w: probe: %v", errNetwork, err)
			}
			return res
		}
		d := time.Since(t0)
		switch {
		case f.Body == bDecline && f.Decline.Reason == drBusy:
			s.Reset()
			res.noSession = fmt.Errorf("%w: %s", errBusy, f.Decline.Detail)
			res.busyDecline = true
			return res
		case f.Body == bDecline:
			return sendVerdict(false, "declined", nil, nil, nil, codeDeclined, 0)
		case f.Body != bProbeAck || f.Probe.Seq != pr.Seq || !bytes.Equal(f.Probe.Nonce, pr.Nonce):
			return sendVerdict(false, "protocol_error", nil, nil, nil, codePV, 0)
		}
		if rtt < 0 || d < rtt {
			rtt = d
		}
		// another probe only while round 1 can still be written in the
		// round-1 window: two more of the fastest round trips fit
		if time.Since(firstProbe)+2*rtt > round1Window {
			break
		}
	}
	credit := min(rtt, capCredit)
	logf("verifier: rtt %v credit %v, ack read %v ago", rtt, credit, time.Since(ackRead))
	if o.round1After > 0 {
		time.Sleep(time.Until(firstProbe.Add(o.round1After)))
	}
	var rounds []attRound
	var elapsed []time.Duration
	var tr []tRound
	var start time.Time
	for i := 0; i < o.rounds; i++ {
		pk := picks[i]
		c := &challenge{Round: uint32(i + 1), Rounds: uint32(o.rounds), Domain: set.Domain,
			Narrative: pk.part.Narrative, Question: pk.q.Question, BudgetMs: o.tauMs}
		n.remember(c)
		if i == 0 {
			res.round1 = time.Now()
		}
		werr := writeFrame(s, &frame{Body: bChallenge, Challenge: c})
		t0 := time.Now()
		if i == 0 {
			start = t0
		}
		entry := attRound{Round: uint32(i + 1), BudgetMs: uint64(o.tauMs), NarrativeTokens: uint32(narrativeTokens(c.Narrative))}
		tr = append(tr, tRound{Round: i + 1, Narrative: c.Narrative, Question: c.Question})
		unanswered := func(waited time.Duration, reason string, code network.StreamErrorCode) *verifierResult {
			entry.EffectiveMs = uint64(max(waited-credit, 0) / time.Millisecond)
			rounds = append(rounds, entry)
			elapsed = append(elapsed, waited)
			return sendVerdict(false, reason, rounds, elapsed, tr, code, credit)
		}
		if werr != nil {
			s.Reset()
			return unanswered(0, "protocol_error", 0)
		}
		roundDL := min(budget+credit, total-t0.Sub(start)+credit)
		s.SetReadDeadline(t0.Add(roundDL + readGrace))
		if o.readLate > 0 {
			time.Sleep(o.readLate)
		}
		f, err := readFrame(r, capProver)
		t1 := time.Now()
		if err != nil {
			code, remote := remoteCode(err)
			switch {
			case isTimeout(err):
				reason := noAnswerReason(t0.Sub(start), credit, budget, total)
				return unanswered(t1.Sub(t0), reason, 0)
			case remote && (code == codeDeclined || code == codeReflect):
				return unanswered(t1.Sub(t0), "declined", 0)
			case errors.Is(err, errOversized):
				return unanswered(t1.Sub(t0), "protocol_error", codeOversized)
			case errors.Is(err, errDecode), errors.Is(err, errPrefix):
				return unanswered(t1.Sub(t0), "protocol_error", codePV)
			}
			s.Reset()
			return unanswered(t1.Sub(t0), "protocol_error", 0)
		}
		switch {
		case f.Body == bDecline:
			return unanswered(t1.Sub(t0), "declined", 0)
		case f.Body != bAnswer || f.Answer.Round != uint32(i+1):
			return unanswered(t1.Sub(t0), "protocol_error", codePV)
		}
		reason, correct, eff := judgeAnswer(pk.q, f.Answer.Answer, t1.Sub(t0), t1.Sub(start), credit, budget, total)
		entry.EffectiveMs, entry.Correct = uint64(eff/time.Millisecond), correct
		tr[i].Answer = f.Answer.Answer
		rounds = append(rounds, entry)
		elapsed = append(elapsed, t1.Sub(t0))
		if o.nextAfter > 0 {
			time.Sleep(time.Until(t1.Add(o.nextAfter)))
		}
		if reason != "" {
			return sendVerdict(false, reason, rounds, elapsed, tr, 0, credit)
		}
	}
	return sendVerdict(true, "ok", rounds, elapsed, tr, 0, credit)
}

package secondimpl2

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/skill"
	lcrypto "github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"google.golang.org/protobuf/encoding/protowire"
)

// Presentation, trust.md §3.5, written from the spec alone.
const (
	presentID        = "/acaptcha/present/1.0.0"
	presentMaxFrames = 32
	presentLimit     = 10 * time.Second // the whole exchange, both sides
	presentFirst     = 3 * time.Second  // the receiver MAY end a presentation without a first record
	maxLifetimeSec   = 2_592_000        // §3.6: records valid for longer are skipped
)

// presentFrames is the request: each envelope as a minimal-uvarint
// length and the envelope.
func presentFrames(envs ...[]byte) []byte {
	var b []byte
	for _, e := range envs {
		b = protowire.AppendVarint(b, uint64(len(e)))
		b = append(b, e...)
	}
	return b
}

// presentOutcome is what the presenter reads back.
type presentOutcome struct {
	learned uint64 // the response, when counted
	counted bool
	code    network.StreamErrorCode // the receiver's reset code, when reset with one
	reset   bool
	err     error // anything else
	took    time.Duration
}

func (o presentOutcome) String() string {
	switch {
	case o.counted:
		return fmt.Sprintf("learned %d after %v", o.learned, o.took.Round(time.Millisecond))
	case o.reset:
		return fmt.Sprintf("reset %#x after %v", uint32(o.code), o.took.Round(time.Millisecond))
	}
	return fmt.Sprintf("error %v after %v", o.err, o.took.Round(time.Millisecond))
}

// presentOpts shape a presentation on the wire: raw is written as given
// (already framed), in chunks of chunk bytes every pause when chunk > 0;
// hold keeps the write side open (a silent or trickling presenter).
type presentOpts struct {
	chunk int
	pause time.Duration
	hold  bool
	first int // with chunk: the first bytes written at once
}

// present runs one presentation from h to p and reads the receiver's
// answer: one minimal uvarint, then the receiver's close.
func present(ctx context.Context, h host.Host, p lpeer.ID, raw []byte, o presentOpts) presentOutcome {
	start := time.Now()
	out := presentOutcome{}
	done := func(err error) presentOutcome {
		out.took = time.Since(start)
		if code, ok := remoteCode(err); ok {
			out.code, out.reset = code, true
		} else if err != nil {
			out.err = err
		}
		return out
	}
	s, err := h.NewStream(ctx, p, presentID)
	if err != nil {
		return done(err)
	}
	defer s.Reset() // no-op once closed
	deadline := time.Now().Add(presentLimit + 2*time.Second)
	s.SetDeadline(deadline)
	var werr error
	if o.chunk <= 0 {
		_, werr = s.Write(raw)
	} else {
		i := min(o.first, len(raw))
		if i > 0 {
			_, werr = s.Write(raw[:i])
		}
		for ; i < len(raw) && werr == nil && time.Now().Before(deadline); i += o.chunk {
			_, werr = s.Write(raw[i:min(i+o.chunk, len(raw))])
			time.Sleep(o.pause)
		}
	}
	if werr == nil && !o.hold {
		werr = s.CloseWrite()
	}
	if werr != nil {
		if _, ok := remoteCode(werr); ok {
			return done(werr)
		}
		// a write failing on a reset: the code is read below
	}
	r := bufio.NewReader(s)
	n, err := readUvarint(r)
	if err != nil {
		return done(err)
	}
	out.learned, out.counted = n, true
	if _, err := r.ReadByte(); err != io.EOF {
		return done(fmt.Errorf("after the count: want EOF, got %v", err))
	}
	return done(nil)
}

// acceptanceOf builds an acceptance by issuer of subject, issued at
// issued and valid for life seconds, with challenges of source src
// (attestation.md §3, §3.2).
func acceptanceOf(issuer ed25519.PrivateKey, subject lpeer.ID, issued, life int64, src string) *attRecord {
	r := &attRecord{
		Issuer: peerIDFromKey(1, issuer.Public().(ed25519.PublicKey)), Subject: []byte(subject),
		Accepted: true, Reason: "ok", Nonce: randBytes(32), Digest: randBytes(32),
		Policy: attPolicy{Rounds: 3, TauMs: 15000, TotalMs: 120000, RTTCreditMs: 500},
		Domain: "second implementation logistics", SetID: fmt.Sprintf("%x", randBytes(32)),
		IssuedAt: issued, ExpiresAt: issued + life, SpecVersion: "1.0.0",
		Provenance: attProvenance{Source: src},
	}
	for i := uint32(1); i <= 3; i++ {
		r.Rounds = append(r.Rounds, attRound{Round: i, BudgetMs: 15000, EffectiveMs: 900, NarrativeTokens: 120, Correct: true})
	}
	return r
}

// junkRecords are n acceptances of subject, each by a fresh issuer the
// node never verified.
func junkRecords(t *testing.T, now int64, subject lpeer.ID, n int) [][]byte {
	t.Helper()
	var out [][]byte
	for i := 0; i < n; i++ {
		uk := ed25519FromSeed(randBytes(32))
		out = append(out, seal(t, acceptanceOf(uk, subject, now-60, 86400, "corpus"), uk, now))
	}
	return out
}

// servedUntilBusy presents nothing from h until the node refuses it
// (busy), at most 9 times, and returns how many were served.
func (e *presentEnv) servedUntilBusy(t *testing.T, h host.Host) int {
	t.Helper()
	for n := 0; n < 9; n++ {
		o := present(e.ctx, h, e.n.ID(), nil, presentOpts{})
		if !o.counted {
			wantReset(t, o, codeBusy)
			return n
		}
	}
	return 9
}

// seal signs r and checks it against this implementation's verifier, so
// that every record the node is shown is valid where the test says so.
func seal(t *testing.T, r *attRecord, k ed25519.PrivateKey, now int64) []byte {
	t.Helper()
	env := sealRecord(r, k)
	if _, err := verifyAttestation(env, verifyOpts{Subject: r.Subject, Now: now, AllowExpired: true}); err != nil {
		t.Fatalf("own record does not verify: %v", err)
	}
	return env
}

// presentEnv is a reference node with quorum 1 and an issuer of this
// implementation that the node admits directly: the node ran its own
// session against it (trust.md §1).
type presentEnv struct {
	n      *peer.Node
	issuer *node
	ctx    context.Context
}

const gatedID = "/secondimpl2/gated/1.0.0"

func newPresentEnv(t *testing.T) *presentEnv {
	t.Helper()
	key, _, err := lcrypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := peer.New(peer.Config{Key: key, StorePath: t.TempDir() + "/store.db",
		ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, Source: ourCorpus(t), Prover: ourProver{},
		TrustQuorum: 1, RequireSource: skill.SourceCorpus})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	n.HandleAdmitted(gatedID, func(s network.Stream) {
		s.Write([]byte("served"))
		s.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	hi, ki := newHost(t, "/ip4/127.0.0.1/tcp/0")
	iss := newNode(hi, ki)
	iss.prover = proverOpts{answer: truth.answerMine}
	if err := hi.Connect(ctx, lpeer.AddrInfo{ID: n.ID(), Addrs: n.Addrs()}); err != nil {
		t.Fatal(err)
	}
	res, err := n.Verify(ctx, hi.ID())
	if err != nil || !res.Verdict.Accepted {
		t.Fatalf("the node's session against the issuer: %+v %v", res, err)
	}
	if a := n.Admission(hi.ID()); !a.Admitted || a.Via != peer.AdmittedDirect {
		t.Fatalf("issuer not admitted directly: %+v", a)
	}
	return &presentEnv{n: n, issuer: iss, ctx: ctx}
}

// presenter is a fresh identity connected to the node.
func (e *presentEnv) presenter(t *testing.T) host.Host {
	t.Helper()
	h, _ := newHost(t, "/ip4/127.0.0.1/tcp/0")
	if err := h.Connect(e.ctx, lpeer.AddrInfo{ID: e.n.ID(), Addrs: e.n.Addrs()}); err != nil {
		t.Fatal(err)
	}
	return h
}

// gated opens the node's gated protocol (trust.md §2): "" when served,
// else the reason decoded from the reset code.
func (e *presentEnv) gated(t *testing.T, h host.Host) string {
	t.Helper()
	s, err := h.NewStream(e.ctx, e.n.ID(), gatedID)
	if err != nil {
		t.Fatalf("gated stream: %v", err)
	}
	defer s.Reset()
	s.SetDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(s)
	if err == nil && string(b) == "served" {
		return ""
	}
	code, ok := remoteCode(err)
	if !ok {
		t.Fatalf("gated stream: %q %v", b, err)
	}
	reasons := map[network.StreamErrorCode]string{0xAC100100: "not_admitted", 0xAC100101: "unattested",
		0xAC100102: "rejected", 0xAC100103: "expired", 0xAC100104: "revoked", 0xAC100105: "blocked",
		0xAC100106: "source_below_minimum"}
	if r, ok := reasons[code]; ok {
		return r
	}
	return fmt.Sprintf("code %#x", uint32(code))
}

func (e *presentEnv) wantAdmittedBy(t *testing.T, h host.Host, issuer lpeer.ID) {
	t.Helper()
	a := e.n.Admission(h.ID())
	if !a.Admitted || a.Via != "quorum" || len(a.Issuers) != 1 || a.Issuers[0] != issuer {
		t.Fatalf("admission of the presenter: %+v, want quorum by %s", a, issuer)
	}
	if r := e.gated(t, h); r != "" {
		t.Fatalf("gated protocol refused an admitted presenter: %s", r)
	}
}

func (e *presentEnv) wantNotAdmitted(t *testing.T, h host.Host) {
	t.Helper()
	if a := e.n.Admission(h.ID()); a.Admitted {
		t.Fatalf("presenter admitted: %+v", a)
	}
	if r := e.gated(t, h); r != "unattested" {
		t.Fatalf("gated protocol: %q, want unattested", r)
	}
}

func wantCount(t *testing.T, o presentOutcome, n uint64) {
	t.Helper()
	if !o.counted || o.learned != n {
		t.Fatalf("presentation: %v, want learned %d", o, n)
	}
}

func wantReset(t *testing.T, o presentOutcome, code network.StreamErrorCode) {
	t.Helper()
	if !o.reset || o.code != code {
		t.Fatalf("presentation: %v, want reset %#x", o, uint32(code))
	}
}

// TestPresentRecords presents records built and signed here and checks
// what the presenter reads back and whether the node then admits it.
func TestPresentRecords(t *testing.T) {
	t.Parallel()
	e := newPresentEnv(t)
	ik := e.issuer.priv
	iid := e.issuer.h.ID()
	now := time.Now().Unix()
	day := int64(86400)

	t.Run("vouched", func(t *testing.T) {
		p := e.presenter(t)
		e.wantNotAdmitted(t, p)
		rec := seal(t, acceptanceOf(ik, p.ID(), now-60, day, "corpus"), ik, now)
		wantCount(t, present(e.ctx, p, e.n.ID(), presentFrames(rec), presentOpts{}), 1)
		e.wantAdmittedBy(t, p, iid)
		// The same record again is not new; an older one by the same
		// issuer is stale (§1 superseding); neither is learned.
		wantCount(t, present(e.ctx, p, e.n.ID(), presentFrames(rec), presentOpts{}), 0)
		old := seal(t, acceptanceOf(ik, p.ID(), now-3600, day, "corpus"), ik, now)
		wantCount(t, present(e.ctx, p, e.n.ID(), presentFrames(old), presentOpts{}), 0)
		e.wantAdmittedBy(t, p, iid)
		// A newer version by a directly admitted issuer is learned at once
		// (no version interval, §3.4 rates).
		newer := seal(t, acceptanceOf(ik, p.ID(), now-30, day, "corpus"), ik, now)
		wantCount(t, present(e.ctx, p, e.n.ID(), presentFrames(newer), presentOpts{}), 1)
		e.wantAdmittedBy(t, p, iid)
	})

	t.Run("revoked", func(t *testing.T) {
		// Records issued up to the second of the revocation stop counting;
		// a presented one issued after it admits again (§1 revocation).
		p := e.presenter(t)
		wantCount(t, present(e.ctx, p, e.n.ID(), presentFrames(seal(t, acceptanceOf(ik, p.ID(), now-60, day, "corpus"), ik, now)), presentOpts{}), 1)
		e.wantAdmittedBy(t, p, iid)
		before := time.Now().Unix()
		if err := e.n.Revoke(p.ID()); err != nil {
			t.Fatal(err)
		}
		after := time.Now().Unix()
		if r := e.gated(t, p); r != "revoked" {
			t.Fatalf("gated protocol after the revocation: %q, want revoked", r)
		}
		at := seal(t, acceptanceOf(ik, p.ID(), before, day, "corpus"), ik, before)
		wantCount(t, present(e.ctx, p, e.n.ID(), presentFrames(at), presentOpts{}), 1)
		if r := e.gated(t, p); r != "revoked" {
			t.Fatalf("a record issued at the revocation's second: %q, want revoked", r)
		}
		later := seal(t, acceptanceOf(ik, p.ID(), after+1, day, "corpus"), ik, after+1)
		wantCount(t, present(e.ctx, p, e.n.ID(), presentFrames(later), presentOpts{}), 1)
		e.wantAdmittedBy(t, p, iid)
	})

	t.Run("receivers_own", func(t *testing.T) {
		// The receiver's own acceptance of the presenter, handed back.
		h, k := newHost(t, "/ip4/127.0.0.1/tcp/0")
		p := newNode(h, k)
		p.prover = proverOpts{answer: truth.answerMine}
		if err := h.Connect(e.ctx, lpeer.AddrInfo{ID: e.n.ID(), Addrs: e.n.Addrs()}); err != nil {
			t.Fatal(err)
		}
		res, err := e.n.Verify(e.ctx, h.ID())
		if err != nil || !res.Verdict.Accepted {
			t.Fatalf("the node's session against the presenter: %+v %v", res, err)
		}
		// Its own evidence is not learned from anyone (§3.5): counted 0.
		wantCount(t, present(e.ctx, h, e.n.ID(), presentFrames(res.Envelope), presentOpts{}), 0)
		if a := e.n.Admission(h.ID()); !a.Admitted || a.Via != peer.AdmittedDirect {
			t.Fatalf("admission of the presenter it verified: %+v", a)
		}
	})

	t.Run("skipped", func(t *testing.T) {
		p := e.presenter(t)
		expired := seal(t, acceptanceOf(ik, p.ID(), now-2*day, day, "corpus"), ik, now)
		future := seal(t, acceptanceOf(ik, p.ID(), now+3600, day, "corpus"), ik, now+3600)
		long := seal(t, acceptanceOf(ik, p.ID(), now-60, maxLifetimeSec+1, "corpus"), ik, now)
		rej := acceptanceOf(ik, p.ID(), now-60, day, "corpus")
		rej.Accepted, rej.Reason, rej.FailedRound = false, "wrong_answer", 1
		rej.Rounds[0].Correct = false
		rej.Rounds = rej.Rounds[:1]
		rejected := seal(t, rej, ik, now)
		major := acceptanceOf(ik, p.ID(), now-60, day, "corpus")
		major.SpecVersion = "2.0.0"
		newMajor := sealRecord(major, ik)
		wantCount(t, present(e.ctx, p, e.n.ID(), presentFrames(expired, future, long, rejected, newMajor), presentOpts{}), 0)
		e.wantNotAdmitted(t, p)
	})

	t.Run("below_minimum_source", func(t *testing.T) {
		// Learned, but it gives no quorum weight (§1 condition 3).
		p := e.presenter(t)
		rec := seal(t, acceptanceOf(ik, p.ID(), now-60, day, "procedural"), ik, now)
		wantCount(t, present(e.ctx, p, e.n.ID(), presentFrames(rec), presentOpts{}), 1)
		e.wantNotAdmitted(t, p)
	})

	t.Run("unknown_issuer", func(t *testing.T) {
		// Kept (the Go node keeps up to 1 024 such records), no weight.
		p := e.presenter(t)
		uk := ed25519FromSeed(randBytes(32))
		rec := seal(t, acceptanceOf(uk, p.ID(), now-60, day, "corpus"), uk, now)
		wantCount(t, present(e.ctx, p, e.n.ID(), presentFrames(rec), presentOpts{}), 1)
		e.wantNotAdmitted(t, p)
	})

	t.Run("foreign_subject", func(t *testing.T) {
		// A record about someone else ends the stream as a protocol
		// violation; the record read before it stays learned.
		p, other := e.presenter(t), e.presenter(t)
		mine := seal(t, acceptanceOf(ik, p.ID(), now-60, day, "corpus"), ik, now)
		theirs := seal(t, acceptanceOf(ik, other.ID(), now-60, day, "corpus"), ik, now)
		wantReset(t, present(e.ctx, p, e.n.ID(), presentFrames(mine, theirs), presentOpts{}), codePV)
		e.wantAdmittedBy(t, p, iid)
		e.wantNotAdmitted(t, other)
	})

	t.Run("foreign_by_step_order", func(t *testing.T) {
		// The first failing step of attestation.md §6 decides (§3.5): a
		// record of another major version is skipped whatever its subject
		// (step 6 before step 10), an expired record about another peer
		// is foreign (step 10 before step 12).
		p, other := e.presenter(t), e.presenter(t)
		major := acceptanceOf(ik, other.ID(), now-60, day, "corpus")
		major.SpecVersion = "2.0.0"
		newMajor := sealRecord(major, ik)
		mine := seal(t, acceptanceOf(ik, p.ID(), now-60, day, "corpus"), ik, now)
		wantCount(t, present(e.ctx, p, e.n.ID(), presentFrames(newMajor, mine), presentOpts{}), 1)
		q := e.presenter(t)
		expired := seal(t, acceptanceOf(ik, other.ID(), now-2*day, day, "corpus"), ik, now)
		wantReset(t, present(e.ctx, q, e.n.ID(), presentFrames(expired), presentOpts{}), codePV)
		e.wantNotAdmitted(t, other)
	})

	t.Run("forged", func(t *testing.T) {
		p := e.presenter(t)
		env := seal(t, acceptanceOf(ik, p.ID(), now-60, day, "corpus"), ik, now)
		env[len(env)-1] ^= 1 // the signature is the last field
		wantReset(t, present(e.ctx, p, e.n.ID(), presentFrames(env), presentOpts{}), codePV)
		e.wantNotAdmitted(t, p)
	})

	t.Run("too_many", func(t *testing.T) {
		// 33 records: the vouching one first, then 32 by fresh issuers.
		p := e.presenter(t)
		envs := append([][]byte{seal(t, acceptanceOf(ik, p.ID(), now-60, day, "corpus"), ik, now)},
			junkRecords(t, now, p.ID(), presentMaxFrames)...)
		wantReset(t, present(e.ctx, p, e.n.ID(), presentFrames(envs...), presentOpts{}), codePV)
		e.wantAdmittedBy(t, p, iid)
		// 32 are fine.
		q := e.presenter(t)
		envs = append([][]byte{seal(t, acceptanceOf(ik, q.ID(), now-60, day, "corpus"), ik, now)},
			junkRecords(t, now, q.ID(), presentMaxFrames-1)...)
		wantCount(t, present(e.ctx, q, e.n.ID(), presentFrames(envs...), presentOpts{}), presentMaxFrames)
		e.wantAdmittedBy(t, q, iid)
	})

	t.Run("framing", func(t *testing.T) {
		p := e.presenter(t)
		rec := seal(t, acceptanceOf(ik, p.ID(), now-60, day, "corpus"), ik, now)
		// A non-minimal prefix: the length with a trailing 0x80 group.
		l := len(rec)
		nonMin := append([]byte{byte(l&0x7f) | 0x80, byte(l>>7) | 0x80, 0x00}, rec...)
		wantReset(t, present(e.ctx, p, e.n.ID(), nonMin, presentOpts{}), codePV)
		// A frame cut short by the close.
		cut := presentFrames(rec)
		wantReset(t, present(e.ctx, p, e.n.ID(), cut[:len(cut)-10], presentOpts{}), codePV)
		// A frame above 8192 bytes, refused on its prefix.
		big := protowire.AppendVarint(nil, maxEnvelope+1)
		wantReset(t, present(e.ctx, p, e.n.ID(), big, presentOpts{hold: true}), codeOversized)
		// An empty presentation learns nothing.
		wantCount(t, present(e.ctx, p, e.n.ID(), nil, presentOpts{}), 0)
		e.wantNotAdmitted(t, p)
	})
}

// TestPresentStalls: a presentation that sends nothing, or trickles its
// first record, is ended with 0xAC100003 3 s after it opened, and a
// second presentation by the same peer meanwhile is busy.
func TestPresentStalls(t *testing.T) {
	t.Parallel()
	e := newPresentEnv(t)
	ik := e.issuer.priv
	now := time.Now().Unix()
	type res struct {
		name string
		o    presentOutcome
	}
	out := make(chan res, 3)
	silent, trickler := e.presenter(t), e.presenter(t)
	rec := seal(t, acceptanceOf(ik, trickler.ID(), now-60, 86400, "corpus"), ik, now)
	started := make(chan struct{})
	go func() {
		close(started)
		out <- res{"silent", present(e.ctx, silent, e.n.ID(), nil, presentOpts{hold: true})}
	}()
	go func() {
		// about 60 bytes a second: the record would take several seconds
		out <- res{"trickle", present(e.ctx, trickler, e.n.ID(), presentFrames(rec), presentOpts{chunk: 6, pause: 100 * time.Millisecond})}
	}()
	<-started
	time.Sleep(500 * time.Millisecond)
	// One presentation per peer at a time.
	busy := present(e.ctx, silent, e.n.ID(), nil, presentOpts{})
	wantReset(t, busy, codeBusy)
	for i := 0; i < 2; i++ {
		r := <-out
		wantReset(t, r.o, codeTimeout)
		if r.o.took < presentFirst-200*time.Millisecond || r.o.took > presentFirst+1500*time.Millisecond {
			t.Errorf("%s ended after %v, want about %v", r.name, r.o.took, presentFirst)
		}
	}
	e.wantNotAdmitted(t, trickler)
	// The silent presenter paid its stall (1 + 3), and the presentation
	// refused as a second one at a time took a token too.
	if n := e.servedUntilBusy(t, silent); n != 3 {
		t.Errorf("silent presenter after its stall: %d more presentations, want 8-1-1-3 = 3", n)
	}
}

// TestPresentWholeExchange: a first record at once, then a trickle past
// the 10 s of the exchange: reset with 0xAC100003, and the record read
// before stays learned.
func TestPresentWholeExchange(t *testing.T) {
	t.Parallel()
	e := newPresentEnv(t)
	ik := e.issuer.priv
	now := time.Now().Unix()
	p := e.presenter(t)
	first := presentFrames(seal(t, acceptanceOf(ik, p.ID(), now-60, 86400, "corpus"), ik, now))
	second := presentFrames(junkRecords(t, now, p.ID(), 1)...)
	// the first frame in one write, then 2 bytes every 100 ms
	raw := append(first, second...)
	o := present(e.ctx, p, e.n.ID(), raw, presentOpts{chunk: 2, pause: 100 * time.Millisecond, first: len(first)})
	wantReset(t, o, codeTimeout)
	if o.took < presentLimit-200*time.Millisecond || o.took > presentLimit+1500*time.Millisecond {
		t.Errorf("ended after %v, want about %v", o.took, presentLimit)
	}
	e.wantAdmittedBy(t, p, e.issuer.h.ID())
}

// TestPresentRates: 8 presentations then one a minute per presenter; a
// presentation ended on a timeout costs 3 more.
func TestPresentRates(t *testing.T) {
	t.Parallel()
	e := newPresentEnv(t)
	p := e.presenter(t)
	if n := e.servedUntilBusy(t, p); n != 8 {
		t.Errorf("a fresh presenter had %d presentations, want 8", n)
	}

	q := e.presenter(t)
	wantReset(t, present(e.ctx, q, e.n.ID(), nil, presentOpts{hold: true}), codeTimeout)
	if n := e.servedUntilBusy(t, q); n != 4 {
		t.Errorf("after a timeout the presenter had %d presentations, want 8-1-3 = 4", n)
	}
}

// TestPresentReserve: once only the last quarter of the total is left,
// only presenters the node admits and presentations with a record by an
// issuer it admits directly among their first 4 are served; a record
// counts there only when the receiver would not skip it (trust.md §3.5).
func TestPresentReserve(t *testing.T) {
	t.Parallel()
	e := newPresentEnv(t)
	ik := e.issuer.priv
	now := time.Now().Unix()
	day := int64(86400)
	// drain presents nothing until a presentation is refused: the total
	// is then down to its kept quarter. Each drain presenter presents at
	// most 7 times (its own bucket holds 8), so a refusal is the total's.
	var dp host.Host
	dUsed := 7
	drain := func() int {
		for i := 0; i < 40; i++ {
			if dUsed == 7 {
				dp, dUsed = e.presenter(t), 0
			}
			dUsed++
			o := present(e.ctx, dp, e.n.ID(), nil, presentOpts{})
			if !o.counted {
				wantReset(t, o, codeBusy)
				return i
			}
		}
		t.Fatal("40 presentations and never busy")
		return 0
	}
	start := time.Now()
	n := drain()
	if refill := int(time.Since(start) / time.Second); n < 24 || n > 24+refill+1 {
		t.Errorf("the total served %d presentations in %v, want 24 (32 less its kept quarter) and its refill of one a second", n, time.Since(start))
	}
	byIssuer := map[string]func(p lpeer.ID) []byte{
		"expired": func(p lpeer.ID) []byte { return seal(t, acceptanceOf(ik, p, now-2*day, day, "corpus"), ik, now) },
		"rejection": func(p lpeer.ID) []byte {
			rej := acceptanceOf(ik, p, now-60, day, "corpus")
			rej.Accepted, rej.Reason, rej.FailedRound = false, "wrong_answer", 1
			rej.Rounds[0].Correct = false
			rej.Rounds = rej.Rounds[:1]
			return seal(t, rej, ik, now)
		},
		"over 30 days": func(p lpeer.ID) []byte {
			return seal(t, acceptanceOf(ik, p, now-60, maxLifetimeSec+1, "corpus"), ik, now)
		},
		"below the minimum source": func(p lpeer.ID) []byte {
			return seal(t, acceptanceOf(ik, p, now-60, day, "procedural"), ik, now)
		},
		"valid": func(p lpeer.ID) []byte { return seal(t, acceptanceOf(ik, p, now-60, day, "corpus"), ik, now) },
	}
	for _, c := range []struct {
		name    string
		at      int  // position of the issuer's record, after at-1 records of fresh issuers
		served  bool // else busy
		learned uint64
		admit   bool
	}{
		{"expired", 4, false, 0, false},
		{"rejection", 4, false, 0, false},
		{"over 30 days", 4, false, 0, false},
		{"below the minimum source", 4, true, 4, false},
		{"valid", 4, true, 4, true},
		{"valid", 5, false, 0, false},
	} {
		// Everything is made before the drain: the total refills one a
		// second, so the probe must follow the drain's refusal at once.
		p := e.presenter(t)
		envs := append(junkRecords(t, now, p.ID(), c.at-1), byIssuer[c.name](p.ID()))
		drain()
		o := present(e.ctx, p, e.n.ID(), presentFrames(envs...), presentOpts{})
		if c.served {
			wantCount(t, o, c.learned)
		} else {
			wantReset(t, o, codeBusy)
		}
		if c.admit {
			e.wantAdmittedBy(t, p, e.issuer.h.ID())
			// A presenter the node admits is served from the reserve
			// whatever it presents.
			drain()
			wantCount(t, present(e.ctx, p, e.n.ID(), nil, presentOpts{}), 0)
		} else if a := e.n.Admission(p.ID()); a.Admitted {
			t.Errorf("%s at %d: presenter admitted: %+v", c.name, c.at, a)
		}
	}
}

// presentation is what this implementation's receiver read.
type presentation struct {
	from    lpeer.ID
	records []*attRecord
	closed  bool          // the presenter closed its write side after its records
	first   time.Duration // from the stream's arrival to the first whole record
	err     error
}

// receiver is the receiving side of §3.5: it reads up to 32 minimal
// frames, verifies each with the presenter as subject, skips what the
// spec skips, answers how many were new to it (unless silent), closes.
type receiver struct {
	h      host.Host
	silent bool
	got    chan presentation
	held   map[string]int64 // issuer+subject -> issued_at
}

func newReceiver(t *testing.T, silent bool) *receiver {
	h, _ := newHost(t, "/ip4/127.0.0.1/tcp/0")
	rc := &receiver{h: h, silent: silent, got: make(chan presentation, 8), held: map[string]int64{}}
	h.SetStreamHandler(presentID, rc.handle)
	return rc
}

func (rc *receiver) handle(s network.Stream) {
	pr := presentation{from: s.Conn().RemotePeer()}
	opened := time.Now()
	defer func() { rc.got <- pr }()
	s.SetDeadline(time.Now().Add(presentLimit))
	r := bufio.NewReader(s)
	learned := 0
	for i := 0; ; i++ {
		n, err := readUvarint(r)
		if err == io.EOF {
			pr.closed = true
			break
		}
		if err != nil || i >= presentMaxFrames {
			pr.err = fmt.Errorf("frame %d: prefix %v", i+1, err)
			s.ResetWithError(codePV)
			return
		}
		if n > maxEnvelope {
			pr.err = fmt.Errorf("frame %d of %d bytes", i+1, n)
			s.ResetWithError(codeOversized)
			return
		}
		env := make([]byte, n)
		if _, err := io.ReadFull(r, env); err != nil {
			pr.err = fmt.Errorf("frame %d: %v", i+1, err)
			s.ResetWithError(codePV)
			return
		}
		if i == 0 {
			pr.first = time.Since(opened)
		}
		now := time.Now().Unix()
		a, err := verifyAttestation(env, verifyOpts{Subject: []byte(pr.from), Now: now})
		switch {
		case errors.Is(err, eExpired), errors.Is(err, eNotYetValid), errors.Is(err, eVersion):
			continue
		case err != nil:
			pr.err = fmt.Errorf("frame %d: %v", i+1, err)
			s.ResetWithError(codePV)
			return
		}
		pr.records = append(pr.records, a)
		if !a.Accepted || a.ExpiresAt-a.IssuedAt > maxLifetimeSec {
			continue
		}
		k := string(a.Issuer) + string(a.Subject)
		if old, ok := rc.held[k]; !ok || a.IssuedAt > old {
			rc.held[k] = a.IssuedAt
			learned++
		}
	}
	if rc.silent {
		time.Sleep(presentLimit + time.Second)
		s.Reset()
		return
	}
	s.Write(protowire.AppendVarint(nil, uint64(learned)))
	s.Close()
}

// TestNodePresents: the node, as presenter, sends this implementation's
// receiver its acceptances about itself, those by issuers it admits
// directly first, in minimal frames, closes its write side and reads the
// answer; a receiver that never answers ends its Present by 10 s.
func TestNodePresents(t *testing.T) {
	t.Parallel()
	e := newPresentEnv(t)
	// The issuer the node admits directly verifies it, then one it never
	// verified: the latter's acceptance is the newer.
	if vr := e.issuer.verify(e.ctx, e.n.ID(), defaultVerifierOpts()); !vr.accepted {
		t.Fatalf("issuer's session against the node: %+v", vr)
	}
	// Two issuers the node never verified, each one second later: the
	// older on llm challenges, the newer on procedural ones.
	stranger := func(src string) *node {
		time.Sleep(1100 * time.Millisecond) // a later issued_at
		h, k := newHost(t, "/ip4/127.0.0.1/tcp/0")
		m := newNode(h, k)
		if err := h.Connect(e.ctx, lpeer.AddrInfo{ID: e.n.ID(), Addrs: e.n.Addrs()}); err != nil {
			t.Fatal(err)
		}
		o := defaultVerifierOpts()
		o.provenance = src
		if vr := m.verify(e.ctx, e.n.ID(), o); !vr.accepted {
			t.Fatalf("a session against the node: %+v", vr)
		}
		return m
	}
	strong, weak := stranger("llm"), stranger("procedural")

	rc := newReceiver(t, false)
	if err := rc.h.Connect(e.ctx, lpeer.AddrInfo{ID: e.n.ID(), Addrs: e.n.Addrs()}); err != nil {
		t.Fatal(err)
	}
	// First contact may present by itself; Present asks for one.
	select {
	case pr := <-rc.got:
		t.Logf("presented at first contact: %d records, %v", len(pr.records), pr.err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := e.n.Present(e.ctx, rc.h.ID()); err != nil {
		t.Fatalf("Present: %v", err)
	}
	pr := <-rc.got
	if pr.err != nil || !pr.closed {
		t.Fatalf("presentation: %+v", pr)
	}
	if pr.first > presentFirst/2 {
		t.Errorf("the first record came %v after the stream opened", pr.first)
	}
	// Those by issuers the node admits directly first, then the stronger
	// source, then the newest (trust.md §3.5).
	var got []string
	for _, r := range pr.records {
		got = append(got, lpeer.ID(r.Issuer).String())
	}
	want := []string{e.issuer.h.ID().String(), strong.h.ID().String(), weak.h.ID().String()}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("presented issuers %v, want %v (admitted directly, llm, procedural)", got, want)
	}

	silent := newReceiver(t, true)
	if err := silent.h.Connect(e.ctx, lpeer.AddrInfo{ID: e.n.ID(), Addrs: e.n.Addrs()}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := e.n.Present(e.ctx, silent.h.ID())
	if took := time.Since(start); err == nil || took > presentLimit+1500*time.Millisecond {
		t.Fatalf("Present to a receiver that never answers: %v after %v, want an error by %v", err, took, presentLimit)
	}
}

// TestPresentUntrustedBound: the Go node keeps at most 1 024 presented
// records of issuers it does not admit directly; past that they are
// acknowledged and counted 0, while a record by a directly admitted
// issuer is still learned (trust.md §3.5, §3.6).
func TestPresentUntrustedBound(t *testing.T) {
	t.Parallel()
	e := newPresentEnv(t)
	ik := e.issuer.priv
	now := time.Now().Unix()
	day := int64(86400)
	const bound = 1024
	total := uint64(0)
	var p host.Host
	deadline := time.Now().Add(25 * time.Second)
	// 32 presentations of 32, at most 7 a presenter (224 records a
	// subject, under the 256 kept per subject), waiting for the total's
	// refill when it is down to its kept quarter.
	// A refused presentation has paid its presenter's token (§3.5): the
	// next try is by a fresh presenter.
	for used := 7; total < bound; used++ {
		if used == 7 {
			p, used = e.presenter(t), 0
		}
		o := present(e.ctx, p, e.n.ID(), presentFrames(junkRecords(t, now, p.ID(), presentMaxFrames)...), presentOpts{})
		if !o.counted {
			wantReset(t, o, codeBusy)
			if time.Now().After(deadline) {
				t.Fatalf("after %d records the node stayed busy", total)
			}
			time.Sleep(time.Second)
			used = 6
			continue
		}
		if o.learned != presentMaxFrames {
			t.Fatalf("after %d records: %v, want all 32 learned", total, o)
		}
		total += o.learned
	}
	// Past the bound: acknowledged, counted 0.
	time.Sleep(time.Second)
	r := e.presenter(t)
	wantCount(t, present(e.ctx, r, e.n.ID(), presentFrames(junkRecords(t, now, r.ID(), 2)...), presentOpts{}), 0)
	time.Sleep(time.Second)
	q := e.presenter(t)
	envs := append([][]byte{seal(t, acceptanceOf(ik, q.ID(), now-60, day, "corpus"), ik, now)}, junkRecords(t, now, q.ID(), 3)...)
	wantCount(t, present(e.ctx, q, e.n.ID(), presentFrames(envs...), presentOpts{}), 1)
	e.wantAdmittedBy(t, q, e.issuer.h.ID())
}

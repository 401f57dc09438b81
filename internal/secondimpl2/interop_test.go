package secondimpl2

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/protocol/pb"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/libp2p/go-libp2p"
	lcrypto "github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
)

// oracle knows the ground truth of every set either side serves.
type oracle struct {
	mu sync.Mutex
	m  map[string]string
}

var truth = &oracle{m: map[string]string{}}

func (o *oracle) add(narrative, question, ans string) {
	o.mu.Lock()
	o.m[narrative+"\x00"+question] = ans
	o.mu.Unlock()
}

func (o *oracle) lookup(narrative, question string) (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	a, ok := o.m[narrative+"\x00"+question]
	return a, ok
}

func (o *oracle) answerMine(c *challenge) (string, error) {
	a, ok := o.lookup(c.Narrative, c.Question)
	if !ok {
		return "", fmt.Errorf("oracle: unknown challenge")
	}
	return a, nil
}

// ourProver is the reference's skill.Prover backed by the oracle.
type ourProver struct{ delay time.Duration }

func (p ourProver) NewSession() skill.Answerer { return p }
func (p ourProver) Answer(ctx context.Context, c skill.Challenge) (string, error) {
	if p.delay > 0 {
		select {
		case <-time.After(p.delay):
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	a, ok := truth.lookup(c.Narrative, c.Question)
	if !ok {
		return "", fmt.Errorf("oracle: unknown challenge")
	}
	return a, nil
}

var vocab = strings.Fields(`the crew logged a reading at dawn while pump valve sensor relay drifted
north south east west before after twice then kept stayed failed passed moved stored shipped checked
cold warm amber green grey harbour depot ridge canal orchard mill tower yard`)

// mySet makes a fresh set of this implementation's own (never a corpus
// shared with the peer, protocol.md §7).
func mySet() *specSet {
	s := &specSet{Domain: "second implementation logistics"}
	for p := 0; p < 3; p++ {
		code := fmt.Sprintf("%c%c-%d", 'A'+randIntn(26), 'A'+randIntn(26), 100+randIntn(9000))
		var w []string
		for i := 0; i < 60; i++ {
			w = append(w, vocab[randIntn(len(vocab))])
			if i == 30 {
				w = append(w, "unit", code, "was", "flagged")
			}
		}
		narr := fmt.Sprintf("Log part %d: %s.", p+1, strings.Join(w, " "))
		q := fmt.Sprintf("Which unit was flagged in log part %d?", p+1)
		s.Parts = append(s.Parts, specPart{Narrative: narr, Questions: []specQuestion{{Question: q, Answer: code}}})
		truth.add(narr, q, code)
	}
	return s
}

func defaultVerifierOpts() verifierOpts {
	return verifierOpts{rounds: 3, tauMs: 15000, totalMs: 120000, creditMs: 500, probes: 1, source: mySet}
}

func newHost(t *testing.T, listen string) (host.Host, lcrypto.PrivKey) {
	t.Helper()
	key, _, err := lcrypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	return newHostWith(t, key, listen), key
}

// newHostWith is newHost with the given key.
func newHostWith(t *testing.T, key lcrypto.PrivKey, listen string) host.Host {
	t.Helper()
	h, err := libp2p.New(libp2p.Identity(key), libp2p.ListenAddrStrings(listen))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// ourCorpus serves spec/examples (and adds them to the oracle).
func ourCorpus(t *testing.T) skill.Source {
	t.Helper()
	sets, err := skill.LoadDir(filepath.Join("..", "..", "spec", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sets {
		for _, p := range s.Parts {
			for _, q := range p.Questions {
				truth.add(p.Narrative, q.Question, q.Answer)
			}
		}
	}
	c, err := skill.NewCorpus("examples", sets, nil, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type pair struct {
	mine    *node
	ours    *protocol.Service
	oursH   host.Host
	proved  chan protocol.ProverResult
	ctx     context.Context
	cancel  context.CancelFunc
	ourConf protocol.Config
	backRes chan backResult
}

type backResult struct {
	res *protocol.Result
	err error
}

func newPair(t *testing.T, transport string, conf protocol.Config) *pair {
	t.Helper()
	return newPairDialing(t, transport, conf, false)
}

// newPairDialing is newPair where our node opens the connection to mine
// when oursDials (newPair: mine opens it), which decides who came to whom
// (§5b).
func newPairDialing(t *testing.T, transport string, conf protocol.Config, oursDials bool) *pair {
	t.Helper()
	listen := "/ip4/127.0.0.1/tcp/0"
	if transport == "quic" {
		listen = "/ip4/127.0.0.1/udp/0/quic-v1"
	}
	hm, km := newHost(t, listen)
	ho, _ := newHost(t, listen)
	p := &pair{mine: newNode(hm, km), oursH: ho, proved: make(chan protocol.ProverResult, 64), backRes: make(chan backResult, 4)}
	p.mine.prover = proverOpts{answer: truth.answerMine}
	p.mine.backOpts = defaultVerifierOpts()
	if conf.Source == nil {
		conf.Source = ourCorpus(t)
	}
	if conf.Prover == nil {
		conf.Prover = ourProver{}
	}
	conf.OnProved = func(r protocol.ProverResult) { p.proved <- r }
	svc, err := protocol.NewService(ho, conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	p.ours, p.ourConf = svc, conf
	p.ctx, p.cancel = context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(p.cancel)
	dialer, to := hm, ho
	if oursDials {
		dialer, to = ho, hm
	}
	if err := dialer.Connect(p.ctx, lpeer.AddrInfo{ID: to.ID(), Addrs: to.Addrs()}); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *pair) ourProved(t *testing.T) protocol.ProverResult {
	t.Helper()
	select {
	case r := <-p.proved:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("our prover reported nothing")
	}
	return protocol.ProverResult{}
}

func (p *pair) myProved(t *testing.T) *proverResult {
	t.Helper()
	select {
	case r := <-p.mine.proved:
		return r
	case <-time.After(3 * time.Minute):
		t.Fatal("my prover reported nothing")
	}
	return nil
}

// checkMine: my verifier's session against our prover, accepted and
// verified by our prover against itself as subject.
func (p *pair) checkMine(t *testing.T, vr *verifierResult) protocol.ProverResult {
	t.Helper()
	if vr.noSession != nil || !vr.accepted {
		t.Fatalf("my verifier vs our prover: no session %v, %s %v", vr.noSession, vr.reason, vr.rounds)
	}
	pr := p.ourProved(t)
	if pr.Err != nil || !pr.Accepted || pr.Attestation == nil || pr.AttestationErr != nil || pr.Rounds != 3 {
		t.Fatalf("our prover: %+v", pr)
	}
	if _, err := verifyAttestation(vr.envelope, verifyOpts{Subject: []byte(p.oursH.ID()), Now: time.Now().Unix()}); err != nil {
		t.Fatalf("my own record: %v", err)
	}
	return pr
}

// checkOurs: our verifier's session against my prover.
func (p *pair) checkOurs(t *testing.T, res *protocol.Result, err error) *proverResult {
	t.Helper()
	if err != nil || res == nil || !res.Verdict.Accepted {
		t.Fatalf("our verifier vs my prover: %v %+v", err, res)
	}
	pr := p.myProved(t)
	if pr.err != nil || pr.record == nil || pr.recordErr != nil || !pr.verdict.Accepted || pr.answered != 3 {
		t.Fatalf("my prover: %+v (verdict %+v)", pr, pr.verdict)
	}
	if _, _, err := protocol.VerifyAttestation(res.Envelope, protocol.VerifyOptions{Subject: p.mine.h.ID(), Now: time.Now()}); err != nil {
		t.Fatalf("our record: %v", err)
	}
	return pr
}

func TestInteropBothDirections(t *testing.T) {
	t.Parallel()
	for _, tr := range []string{"tcp", "quic"} {
		t.Run(tr, func(t *testing.T) {
			p := newPair(t, tr, protocol.Config{})
			const sessions = 4
			for i := 0; i < sessions; i++ {
				p.checkMine(t, p.mine.verify(p.ctx, p.oursH.ID(), defaultVerifierOpts()))
				res, err := p.ours.Verify(p.ctx, p.mine.h.ID(), false)
				p.checkOurs(t, res, err)
			}
			t.Logf("%s: %d sessions each way accepted", tr, sessions)
		})
	}
}

// Both directions at once on one connection (a mutual attestation of two
// independent sessions, protocol.md §1).
func TestInteropConcurrentMutual(t *testing.T) {
	t.Parallel()
	p := newPair(t, "tcp", protocol.Config{})
	var wg sync.WaitGroup
	var vr *verifierResult
	wg.Add(1)
	go func() { defer wg.Done(); vr = p.mine.verify(p.ctx, p.oursH.ID(), defaultVerifierOpts()) }()
	res, err := p.ours.Verify(p.ctx, p.mine.h.ID(), false)
	wg.Wait()
	p.checkMine(t, vr)
	p.checkOurs(t, res, err)
}

// A reciprocal request each way (protocol.md §1a.3): our verifier asks
// mine to verify it back; my verifier asks ours.
func TestInteropReciprocal(t *testing.T) {
	t.Parallel()
	var p *pair
	conf := protocol.Config{}
	conf.OnReciprocal = func(peerID lpeer.ID, drawsLeft bool) pb.Reciprocal {
		go func() {
			res, err := p.ours.Verify(p.ctx, peerID, false)
			p.backRes <- backResult{res, err}
		}()
		return pb.Reciprocal_RECIPROCAL_WILL
	}
	p = newPair(t, "tcp", conf)
	// ours asks mine
	p.mine.prover.verifyBack = true
	res, err := p.ours.Verify(p.ctx, p.mine.h.ID(), true)
	if err != nil || res.Reciprocal != pb.Reciprocal_RECIPROCAL_WILL {
		t.Fatalf("ours asking mine: %v reciprocal %v", err, res)
	}
	p.checkOurs(t, res, err)
	select {
	case vr := <-p.mine.back:
		p.checkMine(t, vr)
	case <-time.After(3 * time.Minute):
		t.Fatal("no session back from mine")
	}
	// mine asks ours
	o := defaultVerifierOpts()
	o.reciprocal = true
	vr := p.mine.verify(p.ctx, p.oursH.ID(), o)
	if vr.reciprocal != 1 {
		t.Fatalf("our reciprocal answer %d", vr.reciprocal)
	}
	p.checkMine(t, vr)
	select {
	case b := <-p.backRes:
		p.checkOurs(t, b.res, b.err)
	case <-time.After(3 * time.Minute):
		t.Fatal("no session back from ours")
	}
}

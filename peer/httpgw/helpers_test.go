package httpgw

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/spec"
)

// answerKey answers challenges of the embedded example sets (the ground
// truth of spec/examples, not a solver).
type answerKey map[[32]byte]string

func keyOf(narrative, question string) [32]byte {
	return sha256.Sum256([]byte(strings.Join(strings.Fields(narrative), " ") + "\x00" + strings.Join(strings.Fields(question), " ")))
}

func newAnswerKey(t testing.TB) (answerKey, []*skill.Set) {
	t.Helper()
	sets, err := spec.Examples()
	if err != nil {
		t.Fatal(err)
	}
	k := answerKey{}
	for _, s := range sets {
		for _, p := range s.Parts {
			for _, q := range p.Questions {
				k[keyOf(p.Narrative, q.Question)] = q.Answer
			}
		}
	}
	return k, sets
}

func (k answerKey) answer(c *Challenge) string {
	if a, ok := k[keyOf(c.Narrative, c.Question)]; ok {
		return a
	}
	return "unknown"
}

// agent is a test client of the door with its own libp2p key.
type agent struct {
	t    testing.TB
	base string
	hc   *http.Client
	priv crypto.PrivKey
	id   peer.ID
}

func newAgent(t testing.TB, base string) *agent {
	t.Helper()
	priv, id := testutil.NewKey(t)
	return &agent{t: t, base: base, hc: &http.Client{Timeout: 30 * time.Second}, priv: priv, id: id}
}

// post sends v as JSON and decodes the response into out; it returns the
// status and, for error statuses, the error body.
func (a *agent) post(path string, v any, out any) (int, ErrorBody) {
	a.t.Helper()
	var body io.Reader
	switch b := v.(type) {
	case []byte:
		body = bytes.NewReader(b)
	default:
		data, err := json.Marshal(v)
		if err != nil {
			a.t.Fatal(err)
		}
		body = bytes.NewReader(data)
	}
	resp, err := a.hc.Post(a.base+path, "application/json", body)
	if err != nil {
		a.t.Fatalf("POST %s: %v", path, err)
	}
	return a.decode(resp, out)
}

func (a *agent) get(path string, out any) (int, ErrorBody) {
	a.t.Helper()
	resp, err := a.hc.Get(a.base + path)
	if err != nil {
		a.t.Fatalf("GET %s: %v", path, err)
	}
	return a.decode(resp, out)
}

func (a *agent) decode(resp *http.Response, out any) (int, ErrorBody) {
	a.t.Helper()
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		a.t.Fatal(err)
	}
	var eb ErrorBody
	if resp.StatusCode >= 400 {
		if err := json.Unmarshal(data, &eb); err != nil || eb.Code == "" {
			a.t.Fatalf("status %d with a body that is not {code, message}: %q", resp.StatusCode, data)
		}
		return resp.StatusCode, eb
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			a.t.Fatalf("decode %q: %v", data, err)
		}
	}
	return resp.StatusCode, eb
}

// create opens a session and checks the basics of the response.
func (a *agent) create() *Session {
	a.t.Helper()
	var v Session
	if st, eb := a.post("/v1/sessions", map[string]string{"peer_id": a.id.String()}, &v); st != http.StatusCreated {
		a.t.Fatalf("create: %d %+v", st, eb)
	}
	if v.State != StateAwaitingStart || len(v.Nonce) != protocol.NonceBytes || v.PowDifficulty == nil {
		a.t.Fatalf("create returned %+v", v)
	}
	return &v
}

// startReq builds a valid start request for v.
func (a *agent) startReq(v *Session) startRequest {
	a.t.Helper()
	verifier, err := peer.Decode(v.Verifier)
	if err != nil {
		a.t.Fatal(err)
	}
	msg := StartMessage(v.SessionID, v.Nonce, verifier, a.id)
	if !bytes.Equal(msg, v.StartMessage) {
		a.t.Fatalf("start_message differs from the one built by the spec")
	}
	sig, err := a.priv.Sign(msg)
	if err != nil {
		a.t.Fatal(err)
	}
	pub, err := crypto.MarshalPublicKey(a.priv.GetPublic())
	if err != nil {
		a.t.Fatal(err)
	}
	pow, err := protocol.SolvePow(context.Background(), v.Nonce, a.id, *v.PowDifficulty, protocol.MaxPowDifficulty)
	if err != nil {
		a.t.Fatal(err)
	}
	return startRequest{PublicKey: pub, Signature: sig, Pow: pow}
}

// run drives a session to its end: answer gives each round's answer and
// may sleep. It returns the final view.
func (a *agent) run(answer func(c *Challenge) string) *Session {
	a.t.Helper()
	v := a.create()
	id := v.SessionID
	var cur Session
	if st, eb := a.post("/v1/sessions/"+id+"/start", a.startReq(v), &cur); st != http.StatusOK {
		a.t.Fatalf("start: %d %+v", st, eb)
	}
	for range 3 * protocol.MaxProbes {
		if cur.State != StateProbing {
			break
		}
		next := Session{}
		if st, eb := a.post("/v1/sessions/"+id+"/probe", probeRequest{Seq: ptr(cur.Probe.Seq), Nonce: ptr(cur.Probe.Nonce)}, &next); st != http.StatusOK {
			a.t.Fatalf("probe: %d %+v", st, eb)
		}
		cur = next
	}
	for range 4 {
		if cur.State != StateAnswering {
			break
		}
		ans := answer(cur.Challenge)
		next := Session{}
		if st, eb := a.post("/v1/sessions/"+id+"/answer", answerRequest{Round: ptr(cur.Challenge.Round), Answer: &ans}, &next); st != http.StatusOK {
			a.t.Fatalf("answer: %d %+v", st, eb)
		}
		cur = next
	}
	if cur.State != StateDone || cur.Result == nil {
		a.t.Fatalf("session did not end with a result: %+v", cur)
	}
	return &cur
}

// ---- a minimal fake core, for handler edge cases only ----

type fakeCore struct {
	self   peer.ID
	policy skill.Policy
	set    *skill.Set

	mu       sync.Mutex
	aborted  []error
	finished []*protocol.Result
	pow      int
	quota    bool
	reflect  func()
	addrs    []netip.Addr // BeginOptions.Addr of every Begin
}

func newFakeCore(t testing.TB, set *skill.Set, p skill.Policy) *fakeCore {
	priv, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := peer.IDFromPrivateKey(priv)
	return &fakeCore{self: id, policy: p, set: set, pow: 4}
}

func (f *fakeCore) Self() peer.ID        { return f.self }
func (f *fakeCore) Policy() skill.Policy { return f.policy }

func (f *fakeCore) Begin(p peer.ID, opt BeginOptions) (CoreSession, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.addrs = append(f.addrs, opt.Addr)
	if f.quota {
		return nil, fmt.Errorf("%w: %s", protocol.ErrPeerQuota, p)
	}
	n := make([]byte, protocol.NonceBytes)
	_, _ = rand.Read(n)
	return &fakeSession{f: f, p: p, nonce: n, pow: max(f.pow, opt.MinPowDifficulty)}, nil
}

type fakeSession struct {
	f     *fakeCore
	p     peer.ID
	nonce []byte
	pow   int
	sess  *skill.Session
	rtt   time.Duration
}

func (s *fakeSession) Nonce() []byte      { return s.nonce }
func (s *fakeSession) PowDifficulty() int { return s.pow }
func (s *fakeSession) Pay(_ context.Context, pow []byte) error {
	if !protocol.CheckPow(s.nonce, s.p, pow, s.pow) {
		return fmt.Errorf("%w: bad pow", protocol.ErrUnpaid)
	}
	sess, err := skill.NewSession(s.f.set, s.f.policy, nil)
	if err != nil {
		return err
	}
	s.sess = sess
	return nil
}
func (s *fakeSession) Done() bool                    { return s.sess.Done() }
func (s *fakeSession) SetRTT(d time.Duration)        { s.rtt = d }
func (s *fakeSession) Credit() time.Duration         { return s.sess.Credit(s.rtt) }
func (s *fakeSession) Next() (skill.Challenge, bool) { return s.sess.Current() }
func (s *fakeSession) AnswerDeadline(since time.Duration) time.Duration {
	return s.sess.AnswerDeadline(s.rtt, since)
}
func (s *fakeSession) Submit(a string, t skill.Timing) (skill.RoundRecord, error) {
	return s.sess.Submit(a, t)
}
func (s *fakeSession) Fail(r skill.Reason, d string, del bool)            { s.sess.Fail(r, d, del) }
func (s *fakeSession) FailRound(r skill.Reason, d string, t skill.Timing) { s.sess.FailRound(r, d, t) }
func (s *fakeSession) OnReflected(f func()) {
	s.f.mu.Lock()
	s.f.reflect = f
	s.f.mu.Unlock()
}
func (s *fakeSession) Finish() *protocol.Result {
	v, _ := s.sess.Verdict()
	res := &protocol.Result{Peer: s.p, Verdict: v, RTT: s.rtt, Credit: s.sess.Credit(s.rtt)}
	s.f.mu.Lock()
	s.f.finished = append(s.f.finished, res)
	s.f.mu.Unlock()
	return res
}
func (s *fakeSession) Abort(err error) {
	s.f.mu.Lock()
	s.f.aborted = append(s.f.aborted, err)
	s.f.mu.Unlock()
}

// ptr is a pointer to a copy of v (the step bodies' fields).
func ptr[T any](v T) *T { return &v }

// startAndProbe starts session v with the agent's key and answers its
// probes; it returns the session as the last probe's answer left it
// (answering, or whatever ended it).
func (a *agent) startAndProbe(v *Session) Session {
	var cur Session
	a.post("/v1/sessions/"+v.SessionID+"/start", a.startReq(v), &cur)
	for cur.State == StateProbing {
		next := Session{}
		a.post("/v1/sessions/"+v.SessionID+"/probe", probeRequest{Seq: ptr(cur.Probe.Seq), Nonce: ptr(cur.Probe.Nonce)}, &next)
		cur = next
	}
	return cur
}

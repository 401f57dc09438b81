package protocol

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/protocol/pb"
	"github.com/acaptcha/acaptcha/skill"
)

// loadVector decodes spec/vectors/name strictly into v.
func loadVector(t *testing.T, name string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "spec", "vectors", name))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

type reasonsVector struct {
	Description string    `json:"description"`
	Set         skill.Set `json:"set"`
	Policy      struct {
		Rounds      int   `json:"rounds"`
		TauMs       int64 `json:"tau_ms"`
		TotalMs     int64 `json:"total_ms"`
		RTTCreditMs int64 `json:"rtt_credit_ms"`
	} `json:"policy"`
	// Events and BeforeRound1Events define the values of a case's
	// end.event and end.before_round_1, with the reason each gives.
	Events             map[string]reasonsEvent `json:"events"`
	BeforeRound1Events map[string]reasonsEvent `json:"before_round_1_events"`
	Cases              []struct {
		Name    string `json:"name"`
		RTTMs   int64  `json:"rtt_ms"`
		Answers []struct {
			Answer       string `json:"answer"`
			ElapsedMs    int64  `json:"elapsed_ms"`
			SinceStartMs int64  `json:"since_start_ms"`
		} `json:"answers"`
		End *struct {
			Event        string `json:"event"`
			WaitedMs     int64  `json:"waited_ms"`
			RoundStartMs int64  `json:"round_start_ms"`
			BeforeRound1 string `json:"before_round_1"`
		} `json:"end"`
		Want struct {
			Accepted    bool         `json:"accepted"`
			Reason      skill.Reason `json:"reason"`
			FailedRound int          `json:"failed_round"`
			Rounds      []struct {
				Round       int   `json:"round"`
				BudgetMs    int64 `json:"budget_ms"`
				EffectiveMs int64 `json:"effective_ms"`
				Correct     bool  `json:"correct"`
			} `json:"rounds"`
		} `json:"want"`
	} `json:"cases"`
	Records []struct {
		Name         string       `json:"name"`
		Accepted     bool         `json:"accepted"`
		Reason       skill.Reason `json:"reason"`
		FailedRound  int          `json:"failed_round"`
		RoundEntries int          `json:"round_entries"`
		Valid        bool         `json:"valid"`
		IssuerWrites bool         `json:"issuer_writes"`
	} `json:"records"`
}

// reasonsEvent is one way a session of reasons.json ends without an
// answer: what happens and the reason it gives.
type reasonsEvent struct {
	Reason  string `json:"reason"`
	Meaning string `json:"meaning"`
}

func ms(v int64) time.Duration { return time.Duration(v) * time.Millisecond }

// vectorRun is a verifier run on a session of the vector's set (first
// question of every part), without a stream: the verdict paths are the
// verifier's own (readErr, decline, failTimed; issuedVerdict of the core
// session).
func vectorRun(t *testing.T, set *skill.Set, p skill.Policy) *verifierRun {
	t.Helper()
	sess, err := skill.NewSession(set, p, zeroReader{})
	if err != nil {
		t.Fatal(err)
	}
	res := &Result{}
	return &verifierRun{ctx: context.Background(), res: res, vs: &VerifierSession{sess: sess, res: res, paid: true, rtt: -1}}
}

// TestSpecReasonVectors replays spec/vectors/reasons.json through the
// verifier's judging and signing paths and checks what it would sign, then
// the failed_round forms a record verifier accepts and an issuer writes.
func TestSpecReasonVectors(t *testing.T) {
	var v reasonsVector
	loadVector(t, "reasons.json", &v)
	if len(v.Cases) < 15 || len(v.Records) < 8 {
		t.Fatalf("%d cases, %d records", len(v.Cases), len(v.Records))
	}
	p := skill.DefaultPolicy()
	p.Rounds, p.Tau, p.Total, p.RTTCredit = v.Policy.Rounds, ms(v.Policy.TauMs), ms(v.Policy.TotalMs), ms(v.Policy.RTTCreditMs)
	ik := fixedKey(t, 7)
	issuer, _ := peer.IDFromPrivateKey(ik)
	subject, _ := peer.IDFromPrivateKey(fixedKey(t, 8))
	now := time.Unix(1_800_000_000, 0)
	reasonsSeen := map[skill.Reason]bool{}
	// Every end a case names is defined, with the reason it gives (an
	// implementation reads them there, not from their names).
	for _, c := range v.Cases {
		if c.End == nil {
			continue
		}
		table, name := v.Events, c.End.Event
		if c.End.BeforeRound1 != "" {
			table, name = v.BeforeRound1Events, c.End.BeforeRound1
		}
		ev, ok := table[name]
		switch {
		case !ok || ev.Meaning == "":
			t.Errorf("%s: end %q is not defined in the vector", c.Name, name)
		case name == "no_answer_deadline":
			if c.Want.Reason != skill.ReasonTimeout && c.Want.Reason != skill.ReasonTotalTimeout {
				t.Errorf("%s: %s gives %s", c.Name, name, c.Want.Reason)
			}
		case skill.Reason(ev.Reason) != c.Want.Reason:
			t.Errorf("%s: end %q is defined as giving %s, the case wants %s", c.Name, name, ev.Reason, c.Want.Reason)
		}
	}
	for _, c := range v.Cases {
		t.Run(c.Name, func(t *testing.T) {
			set := v.Set
			vr := vectorRun(t, &set, p)
			rtt := ms(c.RTTMs)
			vr.rtt = rtt
			var since time.Duration
			for _, a := range c.Answers {
				vr.vs.shown = true
				vr.vs.answers = append(vr.vs.answers, a.Answer)
				since = ms(a.SinceStartMs)
				if _, err := vr.vs.sess.Submit(a.Answer, skill.Timing{Elapsed: ms(a.ElapsedMs), RTT: rtt, SinceStart: since}); err != nil {
					t.Fatal(err)
				}
			}
			if e := c.End; e != nil && !vr.vs.sess.Done() {
				switch e.BeforeRound1 {
				case "decline":
					vr.fail(vr.decline(&pb.Decline{Reason: pb.DeclineReason_DECLINE_REASON_REFUSED}, true), false)
				case "bad_probe_ack":
					vr.fail(failure(skill.ReasonProtocolError, ErrCodeProtocolViolation, "probe ack does not match"), false)
				case "reset_protocol_violation":
					err := vr.readErr("probe ack", &frameError{err: &network.StreamError{ErrorCode: ErrCodeProtocolViolation, Remote: true}}, true)
					if _, ok := err.(*sessionFailure); !ok {
						t.Fatalf("a reset before round 1 after a paid ack ended no session: %v", err)
					}
					vr.fail(err, false)
				case "":
					vr.vs.shown = true
					waited := skill.Timing{Elapsed: ms(e.WaitedMs), RTT: rtt, SinceStart: since + ms(e.WaitedMs)}
					if e.Event == "no_answer_deadline" {
						// As rounds() decides it (totalSetDeadline).
						start := ms(e.RoundStartMs)
						cur, _ := vr.vs.sess.Current()
						deadline := vr.vs.sess.AnswerDeadline(rtt, start)
						err := vr.readErr("answer", &frameError{err: os.ErrDeadlineExceeded}, false)
						if sf, ok := err.(*sessionFailure); ok && sf.reason == skill.ReasonTimeout && totalSetDeadline(deadline, cur.Budget, vr.vs.sess.Credit(rtt)) {
							sf.reason = skill.ReasonTotalTimeout
						}
						waited.SinceStart = start + ms(e.WaitedMs)
						vr.failTimed(err, waited)
						break
					}
					vr.failTimed(endFailure(t, vr, e.Event), waited)
				default:
					t.Fatalf("unknown before_round_1 %q", e.BeforeRound1)
				}
			}
			verdict, ok := vr.vs.sess.Verdict()
			if !ok {
				t.Fatal("no verdict")
			}
			iv := vr.vs.issuedVerdict(verdict)
			if iv.Accepted != c.Want.Accepted || iv.Reason != c.Want.Reason || iv.FailedRound != c.Want.FailedRound {
				t.Fatalf("verdict %v %s failed_round %d, want %v %s %d (%s)", iv.Accepted, iv.Reason, iv.FailedRound,
					c.Want.Accepted, c.Want.Reason, c.Want.FailedRound, iv.Detail)
			}
			reasonsSeen[iv.Reason] = true
			a := NewAttestation(issuer, subject, make([]byte, NonceBytes), vr.vs.sess, iv, now, time.Hour)
			env, err := Seal(a, ik)
			if err != nil {
				t.Fatalf("the issuer refuses its own record: %v", err)
			}
			got, _, err := VerifyAttestation(env, VerifyOptions{Subject: subject, Issuer: issuer, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			if got.FailedRound != c.Want.FailedRound || len(got.Rounds) != len(c.Want.Rounds) {
				t.Fatalf("record failed_round %d with %d rounds, want %d with %d", got.FailedRound, len(got.Rounds), c.Want.FailedRound, len(c.Want.Rounds))
			}
			for i, w := range c.Want.Rounds {
				r := got.Rounds[i]
				if r.Round != w.Round || r.Budget != ms(w.BudgetMs) || r.Effective != ms(w.EffectiveMs) || r.Correct != w.Correct {
					t.Errorf("round %d: %+v, want %+v", i+1, r, w)
				}
			}
			if len(c.Want.Rounds) == 0 && (got.SetID != "" || got.ChallengeDomain != "") {
				t.Errorf("a set given back unseen is named: domain %q set_id %q", got.ChallengeDomain, got.SetID)
			}
			if len(c.Want.Rounds) > 0 && got.SetID != v.Set.ContentID() {
				t.Errorf("set_id %q, want the content ID %q", got.SetID, v.Set.ContentID())
			}
		})
	}
	for _, r := range skill.Reasons {
		if r != skill.ReasonInconclusive && !reasonsSeen[r] {
			t.Errorf("no vector ends %s", r)
		}
	}
	for _, rc := range v.Records {
		t.Run("record/"+rc.Name, func(t *testing.T) {
			a := &Attestation{
				Issuer: issuer, Subject: subject, Accepted: rc.Accepted, Reason: rc.Reason, FailedRound: rc.FailedRound,
				Nonce: make([]byte, NonceBytes), TranscriptDigest: make([]byte, DigestBytes),
				Policy:   PolicySummary{Rounds: 3, Tau: 2 * time.Second, Total: 5 * time.Second},
				IssuedAt: now, ExpiresAt: now.Add(time.Hour), SpecVersion: SpecVersion,
			}
			for i := range rc.RoundEntries {
				a.Rounds = append(a.Rounds, RoundTiming{Round: i + 1, Budget: 2 * time.Second, Effective: time.Second, Correct: rc.Accepted})
			}
			if err := a.Check(now); (err == nil) != rc.Valid {
				t.Errorf("Check: %v, want valid=%v", err, rc.Valid)
			}
			if _, err := Seal(a, ik); (err == nil) != rc.IssuerWrites {
				t.Errorf("Seal: %v, want issuer_writes=%v", err, rc.IssuerWrites)
			}
		})
	}
}

// endFailure turns a vector's end event into the failure the verifier's
// own paths produce for it.
func endFailure(t *testing.T, vr *verifierRun, event string) error {
	t.Helper()
	reset := func(code network.StreamErrorCode) error {
		return &frameError{err: &network.StreamError{ErrorCode: code, Remote: true}}
	}
	timeout := &frameError{err: os.ErrDeadlineExceeded}
	switch event {
	case "no_answer":
		return vr.readErr("answer", timeout, false)
	case "no_answer_total":
		// rounds() turns a timeout into total_timeout when T_total, not
		// the round's budget, set the deadline.
		err := vr.readErr("answer", timeout, false)
		if sf, ok := err.(*sessionFailure); ok && sf.reason == skill.ReasonTimeout {
			sf.reason = skill.ReasonTotalTimeout
		}
		return err
	case "decline":
		return vr.decline(&pb.Decline{Reason: pb.DeclineReason_DECLINE_REASON_REFUSED, Detail: "no"}, false)
	case "reset_declined":
		return vr.readErr("answer", reset(ErrCodeDeclined), false)
	case "bad_frame":
		return failure(skill.ReasonProtocolError, ErrCodeProtocolViolation, "answer for round 2 in round 1")
	case "stream_failed":
		return vr.readErr("answer", &frameError{err: io.ErrUnexpectedEOF}, false)
	case "reflected":
		vr.markReflected()
		return vr.readErr("answer", timeout, false)
	case "reflected_then_declined":
		vr.markReflected()
		return vr.readErr("answer", reset(ErrCodeReflection), false)
	}
	t.Fatalf("unknown end event %q", event)
	return nil
}

type answerCutVector struct {
	Description    string `json:"description"`
	MaxAnswerBytes int    `json:"max_answer_bytes"`
	Cases          []struct {
		Name        string `json:"name"`
		Answer      string `json:"answer"`
		AnswerBytes int    `json:"answer_bytes"`
		CutHex      string `json:"cut_hex"`
		CutBytes    int    `json:"cut_bytes"`
	} `json:"cases"`
	Transcript struct {
		Rounds []struct {
			Round     int    `json:"round"`
			Narrative string `json:"narrative"`
			Question  string `json:"question"`
			Answer    string `json:"answer"`
		} `json:"rounds"`
		DigestHex string `json:"digest_hex"`
	} `json:"transcript"`
}

// TestSpecAnswerCutVectors checks CutAnswer, and that the verifier's signed
// transcript takes the answers cut at a character boundary (not the raw
// 64-byte cut skill.Session keeps).
func TestSpecAnswerCutVectors(t *testing.T) {
	var v answerCutVector
	loadVector(t, "answer_cut.json", &v)
	if v.MaxAnswerBytes != skill.MaxAnswerBytes || len(v.Cases) < 6 {
		t.Fatalf("max %d, %d cases", v.MaxAnswerBytes, len(v.Cases))
	}
	for _, c := range v.Cases {
		if len(c.Answer) != c.AnswerBytes {
			t.Fatalf("%s: answer of %d bytes, vector says %d", c.Name, len(c.Answer), c.AnswerBytes)
		}
		got := CutAnswer(c.Answer)
		if hex.EncodeToString([]byte(got)) != c.CutHex || len(got) != c.CutBytes {
			t.Errorf("%s: cut %x (%d bytes), want %s (%d)", c.Name, got, len(got), c.CutHex, c.CutBytes)
		}
	}
	vr := &verifierRun{vs: &VerifierSession{}}
	var verdict skill.Verdict
	for _, r := range v.Transcript.Rounds {
		raw := r.Answer
		if len(raw) > skill.MaxAnswerBytes {
			raw = raw[:skill.MaxAnswerBytes] // what skill.Session records
		}
		vr.vs.answers = append(vr.vs.answers, r.Answer)
		verdict.Rounds = append(verdict.Rounds, skill.RoundRecord{Round: r.Round, Narrative: r.Narrative, Question: r.Question, Answer: raw, Answered: true})
	}
	iv := vr.vs.issuedVerdict(verdict)
	if d := skill.TranscriptDigest(iv.Rounds); hex.EncodeToString(d[:]) != v.Transcript.DigestHex {
		t.Fatalf("transcript digest %x, want %s", d, v.Transcript.DigestHex)
	}
	if d := skill.TranscriptDigest(verdict.Rounds); hex.EncodeToString(d[:]) == v.Transcript.DigestHex {
		t.Fatal("the vector does not tell a raw byte cut from a character cut")
	}
}

// TestSpecSetIDVector: the record names a served set by its content ID,
// whatever ID the set file gives itself.
func TestSpecSetIDVector(t *testing.T) {
	var v struct {
		Description    string          `json:"description"`
		Set            json.RawMessage `json:"set"`
		HashedInputHex string          `json:"hashed_input_hex"`
		SetID          string          `json:"set_id"`
		SetWithOwnID   json.RawMessage `json:"set_with_own_id"`
		SetIDWithOwnID string          `json:"set_id_with_own_id"`
	}
	loadVector(t, "set_id.json", &v)
	set, err := skill.DecodeSet(v.SetWithOwnID)
	if err != nil {
		t.Fatal(err)
	}
	if set.ID == v.SetIDWithOwnID {
		t.Fatal("the vector's set file should name itself")
	}
	p := skill.DefaultPolicy()
	p.Tau, p.Total = 2*time.Second, 5*time.Second
	vr := vectorRun(t, set, p)
	vr.vs.shown = true
	vr.vs.sess.Fail(skill.ReasonTimeout, "", true)
	verdict, _ := vr.vs.sess.Verdict()
	if got := vr.vs.issuedVerdict(verdict).SetID; got != v.SetIDWithOwnID {
		t.Fatalf("issued set_id %q, want %q", got, v.SetIDWithOwnID)
	}
}

// TestReflectionVectors: normalisation, digest, words, word and shingle
// hashes and the sketch of spec/vectors/reflection.json (§7), on the
// general path and on the fast one.
func TestReflectionVectors(t *testing.T) {
	var v struct {
		Description string                 `json:"description"`
		Cases       []reflectionVectorCase `json:"cases"`
	}
	loadVector(t, "reflection.json", &v)
	if len(v.Cases) < 6 {
		t.Fatalf("%d cases", len(v.Cases))
	}
	hexes := func(hs []uint64) []string {
		var s []string
		for _, h := range hs {
			s = append(s, fmt.Sprintf("%016x", h))
		}
		return s
	}
	long := false
	for _, c := range v.Cases {
		n, q := NormalizeChallengeText(c.Narrative), NormalizeChallengeText(c.Question)
		if n+"\x00"+q != c.Normalized {
			t.Errorf("%s: normalised %q, want %q", c.Name, n+"\x00"+q, c.Normalized)
		}
		if sum := sha256.Sum256([]byte(c.Normalized)); hex.EncodeToString(sum[:]) != c.Digest {
			t.Errorf("%s: the digest is not SHA-256 of the normalised text", c.Name)
		}
		words := append(challengeWords(n), challengeWords(q)...)
		if !slices.Equal(words, c.Words) {
			t.Errorf("%s: words %q, want %q", c.Name, words, c.Words)
		}
		var wh []uint64
		for _, w := range c.Words {
			wh = append(wh, wordHash(w))
		}
		if got := hexes(wh); !slices.Equal(got, c.WordHashes) {
			t.Errorf("%s: word hashes %v, want %v", c.Name, got, c.WordHashes)
		}
		var sh []uint64
		k := min(ShingleWords, len(c.Words))
		for i := 0; i+k <= len(c.Words); i++ {
			sh = append(sh, shingleHash(c.Words[i:i+k]))
		}
		if got := hexes(sh); !slices.Equal(got, c.ShingleHashes) {
			t.Errorf("%s: shingle hashes %v, want %v", c.Name, got, c.ShingleHashes)
		}
		long = long || len(c.ShingleHashes) > SketchSize
		for name, cp := range map[string]*challengePrint{"general": challengeDigestGeneral(c.Narrative, c.Question), "fast": challengeDigest(c.Narrative, c.Question)} {
			if hex.EncodeToString(cp.digest[:]) != c.Digest {
				t.Errorf("%s (%s path): digest %x, want %s", c.Name, name, cp.digest, c.Digest)
			}
			if got := hexes(cp.sketch); !slices.Equal(got, c.Sketch) {
				t.Errorf("%s (%s path): sketch %v, want %v", c.Name, name, got, c.Sketch)
			}
		}
	}
	if !long {
		t.Error("no case has more shingles than the sketch holds")
	}
}

package protocol

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/protocol/pb"
	"github.com/acaptcha/acaptcha/skill"
)

// countingHandler counts log records by level and message.
type countingHandler struct {
	mu     *sync.Mutex
	counts map[slog.Level]map[string]int
}

func newCountingHandler() *countingHandler {
	return &countingHandler{mu: new(sync.Mutex), counts: map[slog.Level]map[string]int{}}
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *countingHandler) WithGroup(string) slog.Handler            { return h }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.counts[r.Level] == nil {
		h.counts[r.Level] = map[string]int{}
	}
	h.counts[r.Level][r.Message]++
	return nil
}

func (h *countingHandler) count(l slog.Level, msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.counts[l][msg]
}

// TestProverRemoteWarnsRateLimited: a verifier that sends challenges the
// answerer fails, or reflects this node's own challenge, gets at most one
// WARN line per message a minute out of the prover; the others go to
// Debug, and each session still ends as before (a Decline, the
// OnProved result).
func TestProverRemoteWarnsRateLimited(t *testing.T) {
	const sessions = 4
	t.Run("answerer did not answer", func(t *testing.T) {
		logs := newCountingHandler()
		failing := skill.ProverFunc(func() skill.Answerer {
			return skill.AnswerFunc(func(context.Context, skill.Challenge) (string, error) {
				return "", errors.New("model unreachable")
			})
		})
		m, b, pr := proverUnderTest(t, "tcp", Config{Prover: failing, Logger: slog.New(logs)})
		for i := range sessions {
			r := openRaw(t, m, b.ID())
			r.send(helloFrame(m.ID(), b.ID(), nil))
			if f, err := r.recv(); err != nil || f.GetHelloAck() == nil {
				t.Fatalf("session %d: hello ack: %v", i, err)
			}
			r.send(challengeFrame(1, "The loop LOOP-0001 persisted.", "Which loop persisted?"))
			f, err := r.recv()
			if err != nil || f.GetDecline().GetReason() != pb.DeclineReason_DECLINE_REASON_PROVER_ERROR {
				t.Fatalf("session %d: got %s %v, want Decline{PROVER_ERROR}", i, frameKind(f), err)
			}
			r.send(&pb.Frame{Body: &pb.Frame_Verdict{Verdict: &pb.Verdict{Reason: string(skill.ReasonDeclined), FailedRound: 1}}})
			_ = r.s.CloseWrite()
			if got := pr.next(t); got.Reason != skill.ReasonDeclined {
				t.Fatalf("session %d: prover result %+v", i, got)
			}
		}
		checkRemoteWarns(t, logs, "answerer did not answer", sessions)
	})
	t.Run("reflected challenge refused", func(t *testing.T) {
		logs := newCountingHandler()
		offenders := make(chan peer.ID, sessions)
		m, b := newHost(t), newHost(t)
		pr := newProved()
		svc := newService(t, b, Config{Prover: constProver("x"), Logger: slog.New(logs), OnProved: pr.fn, HandshakeTimeout: 2 * time.Second,
			OnReflection: func(p peer.ID) { offenders <- p }})
		connect(t, m, b, "tcp")
		const narrative, question = "The loop LOOP-0002 persisted.", "Which loop persisted?"
		// As if this node had issued the challenge to some subject.
		svc.guard.issue(challengeDigest(narrative, question), randomPeer(t), nil, svc.now())
		for i := range sessions {
			r := openRaw(t, m, b.ID())
			r.send(helloFrame(m.ID(), b.ID(), nil))
			if f, err := r.recv(); err != nil || f.GetHelloAck() == nil {
				t.Fatalf("session %d: hello ack: %v", i, err)
			}
			r.send(challengeFrame(1, narrative, question))
			f, err := r.recv()
			if err != nil || f.GetDecline().GetReason() != pb.DeclineReason_DECLINE_REASON_REFLECTION {
				t.Fatalf("session %d: got %s %v, want Decline{REFLECTION}", i, frameKind(f), err)
			}
			_ = r.s.CloseWrite()
			if got := pr.next(t); !errors.Is(got.Err, ErrReflection) {
				t.Fatalf("session %d: prover result %+v", i, got)
			}
			if p := <-offenders; p != m.ID() {
				t.Fatalf("session %d: offender %s", i, p)
			}
		}
		checkRemoteWarns(t, logs, "reflected challenge refused", sessions)
	})
	t.Run("challenge of an unsupported kind declined", func(t *testing.T) {
		// An INFO line, not a warning, but as remote-triggered: a
		// verifier sending kinds no answerer takes wrote one per session.
		logs := newCountingHandler()
		m, b, pr := proverUnderTest(t, "tcp", Config{Prover: constProver("x"), Logger: slog.New(logs)})
		for i := range sessions {
			r := openRaw(t, m, b.ID())
			r.send(helloFrame(m.ID(), b.ID(), nil))
			if f, err := r.recv(); err != nil || f.GetHelloAck() == nil {
				t.Fatalf("session %d: hello ack: %v", i, err)
			}
			c := challengeFrame(1, "sun + flower", "Which word?")
			c.GetChallenge().Kind = "rebus-unregistered"
			r.send(c)
			if f, err := r.recv(); err != nil || f.GetDecline().GetReason() != pb.DeclineReason_DECLINE_REASON_UNSUPPORTED_KIND {
				t.Fatalf("session %d: got %s %v, want Decline{UNSUPPORTED_KIND}", i, frameKind(f), err)
			}
			_ = r.s.CloseWrite()
			drain(r)
			if got := pr.next(t); !errors.Is(got.Err, ErrUnsupportedKind) {
				t.Fatalf("session %d: prover result %+v", i, got)
			}
		}
		const msg = "challenge of an unsupported kind declined"
		if infos, debugs := logs.count(slog.LevelInfo, msg), logs.count(slog.LevelDebug, msg); infos != 1 || debugs != sessions-1 {
			t.Fatalf("%q: %d INFO and %d DEBUG lines for %d sessions; want one INFO, the rest at DEBUG", msg, infos, debugs, sessions)
		}
	})
}

// checkRemoteWarns: n events of a fresh service gave one WARN line (the
// first) and n-1 DEBUG lines.
func checkRemoteWarns(t *testing.T, logs *countingHandler, msg string, n int) {
	t.Helper()
	warns, debugs := logs.count(slog.LevelWarn, msg), logs.count(slog.LevelDebug, msg)
	if warns != 1 || debugs != n-1 {
		t.Fatalf("%q: %d WARN and %d DEBUG lines for %d sessions; want one WARN, the rest at DEBUG", msg, warns, debugs, n)
	}
}

// TestRemoteWarnLimiter: one line per message per remoteWarnEvery, the
// next one saying how many were held back; messages are independent.
func TestRemoteWarnLimiter(t *testing.T) {
	var st remoteWarnState
	t0 := time.Unix(1000, 0)
	steps := []struct {
		msg        string
		at         time.Duration
		ok         bool
		suppressed int
	}{
		{"a", 0, true, 0},
		{"a", time.Second, false, 0},
		{"b", time.Second, true, 0},
		{"a", remoteWarnEvery - time.Nanosecond, false, 0},
		{"a", remoteWarnEvery, true, 2},
		{"a", remoteWarnEvery + time.Second, false, 0},
		{"b", 3 * remoteWarnEvery, true, 0},
		{"a", 3 * remoteWarnEvery, true, 1},
	}
	for i, c := range steps {
		ok, n := st.allow(c.msg, t0.Add(c.at))
		if ok != c.ok || n != c.suppressed {
			t.Fatalf("step %d (%s at %s): ok=%v suppressed=%d, want %v %d", i, c.msg, c.at, ok, n, c.ok, c.suppressed)
		}
	}
}

// TestRemoteWarnStateDropped: a closed service's limiter state goes.
func TestRemoteWarnStateDropped(t *testing.T) {
	svc := newService(t, newHost(t), Config{Prover: constProver("x")})
	svc.warnRemote(slog.New(newCountingHandler()), "answerer did not answer")
	if _, ok := remoteWarns.Load(svc); !ok {
		t.Fatal("no limiter state for a running service")
	}
	svc.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ok := remoteWarns.Load(svc); !ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("limiter state kept after Close")
		}
		time.Sleep(time.Millisecond)
	}
}

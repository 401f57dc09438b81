package httpgw

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// leakySource fails with what a node's source error holds: a local path,
// a model, a provider's message.
type leakySource struct{}

func (leakySource) Name() string { return "corpus:/srv/secret/sets" }
func (leakySource) Next(context.Context) (*skill.Set, error) {
	return nil, fmt.Errorf("corpus /srv/secret/sets: all 3 sets served 1 time(s): %w", skill.ErrExhausted)
}

// TestNoSetDetailStaysLocal: a session that ends inconclusive because the
// node's source could draw no set told the HTTP client the source's error
// on 809b1b3 ("source corpus:/srv/secret/sets: corpus /srv/secret/sets:
// all 3 sets served ...", or an LLM pool's model and provider message),
// where the libp2p door says only that the verifier could not provide a
// challenge (protocol.NoChallengeDetail).
func TestNoSetDetailStaysLocal(t *testing.T) {
	nk, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	n, err := peer.New(peer.Config{Key: nk, StorePath: filepath.Join(t.TempDir(), "db"), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"},
		Policy: skill.DefaultPolicy(), Source: leakySource{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	g, err := ForNode(n.Door(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	defer func() { srv.Close(); g.Close() }()
	a := newAgent(t, srv.URL)
	v := a.create()
	var done Session
	if st, eb := a.post("/v1/sessions/"+v.SessionID+"/start", a.startReq(v), &done); st != http.StatusOK {
		t.Fatalf("start: %d %+v", st, eb)
	}
	for _, view := range []Session{done, func() Session {
		var got Session
		if st, eb := a.get("/v1/sessions/"+v.SessionID, &got); st != http.StatusOK {
			t.Fatalf("get: %d %+v", st, eb)
		}
		return got
	}()} {
		if view.State != StateDone || view.Result == nil || view.Result.Verdict != "INCONCLUSIVE" {
			t.Fatalf("session %+v, want done inconclusive", view)
		}
		if d := view.Result.Detail; strings.Contains(d, "secret") || d != protocol.NoChallengeDetail {
			t.Errorf("result detail %q, want %q", d, protocol.NoChallengeDetail)
		}
	}
}

package httpgw

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/skill"
)

// slowSource draws its set after a while (an LLM pool writing the next
// one while the agent waits, --pool-wait up to 30 s), or gives up when
// the draw's context ends.
type slowSource struct {
	set  *skill.Set
	wait time.Duration
}

func (s slowSource) Name() string { return "slow" }
func (s slowSource) Next(ctx context.Context) (*skill.Set, error) {
	select {
	case <-time.After(s.wait):
		return s.set, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestSlowDrawStillAnswered: the start's response (probe 1, or the
// inconclusive verdict) must be written within the server's write
// timeout (15 s from the request), but the node's draw may wait for its
// source far longer (a pool's --pool-wait up to 30 s; the core's own
// bound, some 40 s): a start whose set came 20 s later got no response
// at all (its write past the deadline failed), and the session, paid
// for, ended expired with the set given back. The door now bounds the
// draw by what the write leaves: a set not drawn by then ends the
// session inconclusive, answered (http.md §4.2).
func TestSlowDrawStillAnswered(t *testing.T) {
	_, sets := newAnswerKey(t)
	nk, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	n, err := peer.New(peer.Config{Key: nk, StorePath: filepath.Join(t.TempDir(), "db"), ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"},
		Policy: skill.DefaultPolicy(), Source: slowSource{set: sets[0], wait: 25 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	g, err := ForNode(n.Door(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(g.Handler())
	srv.Config.WriteTimeout = writeTimeout // as Serve sets it
	srv.Start()
	defer func() { srv.Close(); g.Close() }()
	a := newAgent(t, srv.URL)
	v := a.create()
	start := time.Now()
	resp, err := a.hc.Post(srv.URL+"/v1/sessions/"+v.SessionID+"/start", "application/json", jsonBody(t, a.startReq(v)))
	if err != nil {
		t.Fatalf("start: no response after %v: %v", time.Since(start).Round(time.Millisecond), err)
	}
	var done Session
	st, eb := a.decode(resp, &done)
	t.Logf("start answered after %v: %d %+v %s", time.Since(start).Round(time.Millisecond), st, eb, done.State)
	if st != http.StatusOK || done.State != StateDone || done.Result == nil || done.Result.Verdict != "INCONCLUSIVE" {
		t.Fatalf("start: %d %+v, want done inconclusive", st, done)
	}
}

// jsonBody is v as a JSON request body.
func jsonBody(t *testing.T, v any) io.Reader {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(b)
}

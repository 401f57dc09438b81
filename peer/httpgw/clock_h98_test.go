package httpgw

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/skill"
)

// pipeListener serves connections made by dial over net.Pipe: a
// connection with no buffer at all, so that a server's Write returns only
// once the client read every byte of it, as a TCP write does once the
// client's receive window is closed and the send buffer full (a client
// chooses its receive buffer).
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

var pipeAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}

// addrConn gives a pipe end the loopback addresses the gateway reads.
type addrConn struct{ net.Conn }

func (addrConn) RemoteAddr() net.Addr { return pipeAddr }
func (addrConn) LocalAddr() net.Addr  { return pipeAddr }

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr }

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	srv, cli := net.Pipe()
	select {
	case l.conns <- addrConn{srv}:
		return addrConn{cli}, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// A client that reads a challenge's response up to its question and then
// stops reading holds the server's write (and flush) open while it has
// the narrative and the question: the round's clock must start at most a
// second after the server began writing (http.md §2, as protocol.md §5
// step 5 bounds a QUIC write held by the prover's flow-control credit),
// or the held time is free. Before the bound, a client that held the
// flush 3 s and answered at once was accepted with elapsed_ms near 0.
func TestChallengeFlushHeldIsCharged(t *testing.T) {
	const hold = 3 * time.Second
	key, sets := newAnswerKey(t)
	p := skill.DefaultPolicy()
	p.Rounds, p.Tau, p.Total, p.RTTCredit = 1, 1500*time.Millisecond, 20*time.Second, 10*time.Millisecond
	g, err := New(Config{Core: newFakeCore(t, sets[0], p)})
	if err != nil {
		t.Fatal(err)
	}
	pl := newPipeListener()
	srv := httptest.NewUnstartedServer(g.Handler())
	srv.Listener = pl
	srv.Start()
	tr := &http.Transport{DialContext: pl.dial}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		srv.CloseClientConnections()
		srv.Close()
		g.Close()
	})
	a := newAgent(t, "http://pipe")
	a.hc = &http.Client{Transport: tr, Timeout: 30 * time.Second}

	v := a.create()
	var cur Session
	if st, eb := a.post("/v1/sessions/"+v.SessionID+"/start", a.startReq(v), &cur); st != http.StatusOK || cur.State != StateProbing {
		t.Fatalf("start: %d %+v %+v", st, eb, cur)
	}

	// The probe ack, by hand: its response carries round 1.
	c, err := pl.dial(context.Background(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	body, _ := json.Marshal(probeRequest{Seq: ptr(cur.Probe.Seq), Nonce: ptr(cur.Probe.Nonce)})
	if _, err := fmt.Fprintf(c, "POST /v1/sessions/%s/probe HTTP/1.1\r\nHost: pipe\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", v.SessionID, len(body), body); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReaderSize(c, 16)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// Read up to the field after the question, a byte at a time (the
	// bound on the loop is the response's size cap).
	var got []byte
	one := make([]byte, 1)
	for len(got) < 1<<20 && !bytes.Contains(got, []byte(`"budget_ms"`)) {
		n, err := resp.Body.Read(one)
		got = append(got, one[:n]...)
		if err != nil {
			t.Fatalf("challenge response ended before its question: %v (%q)", err, got)
		}
	}
	time.Sleep(hold) // the narrative and the question are in hand
	rest, err := io.ReadAll(resp.Body)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	var round Session
	if err := json.Unmarshal(append(got, rest...), &round); err != nil || round.Challenge == nil {
		t.Fatalf("challenge response %q: %v", append(got, rest...), err)
	}

	ans := key.answer(round.Challenge)
	var done Session
	if st, eb := a.post("/v1/sessions/"+v.SessionID+"/answer", answerRequest{Round: ptr(1), Answer: &ans}, &done); st != http.StatusOK {
		t.Fatalf("answer: %d %+v", st, eb)
	}
	if done.State != StateDone || done.Result == nil || len(done.Result.Rounds) != 1 {
		t.Fatalf("after the answer: %+v", done)
	}
	r := done.Result.Rounds[0]
	t.Logf("held the flush %s: %s, elapsed %d ms, effective %d ms", hold, done.Result.Reason, r.ElapsedMs, r.EffectiveMs)
	if min := (hold - time.Second).Milliseconds() - 100; r.ElapsedMs < min || done.Result.Accepted || done.Result.Reason != string(skill.ReasonTimeout) {
		t.Fatalf("a client that held the challenge's flush %s: %s, elapsed %d ms; want timeout with elapsed at least %d ms (all but the first second of the hold charged)",
			hold, done.Result.Reason, r.ElapsedMs, min)
	}
}

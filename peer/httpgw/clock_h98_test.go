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
	a, pl := pipeAgent(t, g)

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

// rawPost writes a POST of body to path on c as HTTP/1.1 (the body may
// be given in part: Content-Length is length).
func rawPost(t *testing.T, c net.Conn, path string, length int, body []byte) {
	t.Helper()
	if _, err := fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: pipe\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, length, body); err != nil {
		t.Fatal(err)
	}
}

// An answer request opened in round 1 (its headers read, so the route
// checked the state) whose body comes while round 2's response is held:
// its arrival is before the round's clock started. It is charged from
// the held write's end, as an answer read after a held write on libp2p
// (protocol.md §5 step 5): the elapsed time is never negative and the
// hold past the first second is the client's. Before, the door judged
// the round on an arrival before t0: a negative elapsed time (-987 ms
// here) and effective 0, signed so by the node's core, however long the
// client held the question.
func TestAnswerBeforeHeldFlushEnds(t *testing.T) {
	const hold = 3 * time.Second
	key, sets := newAnswerKey(t)
	set := sets[0]
	p := skill.DefaultPolicy()
	p.Rounds, p.Tau, p.Total, p.RTTCredit = 2, 5*time.Second, 20*time.Second, 10*time.Millisecond
	g, err := New(Config{Core: newFakeCore(t, set, p)})
	if err != nil {
		t.Fatal(err)
	}
	a, pl := pipeAgent(t, g)
	v := a.create()
	cur := a.startAndProbe(v)
	if cur.State != StateAnswering || cur.Challenge.Round != 1 {
		t.Fatalf("after the probes: %+v", cur)
	}
	path := "/v1/sessions/" + v.SessionID + "/answer"
	dial := func() net.Conn {
		c, err := pl.dial(context.Background(), "", "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		return c
	}

	// B: round 2's answer request, opened now: headers and a first byte.
	const length = 256
	b := dial()
	rawPost(t, b, path, length, []byte("{"))
	time.Sleep(200 * time.Millisecond) // the route reads the headers and checks the state

	// A: round 1's answer; its response is round 2, held after the question.
	c := dial()
	body1, _ := json.Marshal(answerRequest{Round: ptr(1), Answer: ptr(key.answer(cur.Challenge))})
	rawPost(t, c, path, len(body1), body1)
	resp, err := http.ReadResponse(bufio.NewReaderSize(c, 16), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got []byte
	one := make([]byte, 1)
	for len(got) < 1<<20 && !bytes.Contains(got, []byte(`"budget_ms"`)) {
		n, err := resp.Body.Read(one)
		got = append(got, one[:n]...)
		if err != nil {
			t.Fatalf("round 2's response ended before its question: %v (%q)", err, got)
		}
	}
	var ans2 string
	for _, q := range set.Parts[1].Questions {
		if qj, _ := json.Marshal(q.Question); bytes.Contains(got, qj) {
			ans2 = q.Answer
		}
	}
	if ans2 == "" {
		t.Fatalf("round 2's question not found in %q", got)
	}
	// B's body, while A holds round 2's flush.
	rest2, _ := json.Marshal(ans2)
	tail := []byte(`"round":2,"answer":` + string(rest2))
	tail = append(tail, bytes.Repeat([]byte(" "), length-1-len(tail)-1)...)
	tail = append(tail, '}')
	if _, err := b.Write(tail); err != nil {
		t.Fatal(err)
	}
	time.Sleep(hold)
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatal(err)
	}

	respB, err := http.ReadResponse(bufio.NewReader(b), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer respB.Body.Close()
	data, _ := io.ReadAll(respB.Body)
	var done Session
	if err := json.Unmarshal(data, &done); err != nil || done.Result == nil || len(done.Result.Rounds) != 2 {
		t.Fatalf("round 2's answer: %d %q", respB.StatusCode, data)
	}
	r := done.Result.Rounds[1]
	t.Logf("round 2 answered during a %s held flush: %s, elapsed %d ms, effective %d ms", hold, done.Result.Reason, r.ElapsedMs, r.EffectiveMs)
	if min := (hold - time.Second).Milliseconds() - 100; r.ElapsedMs < min || done.Result.Reason != string(skill.ReasonOK) {
		t.Fatalf("round 2: %s, elapsed %d ms; want ok (within the budget), elapsed at least %d ms",
			done.Result.Reason, r.ElapsedMs, min)
	}
}

// pipeAgent serves g over an in-memory pipe listener (so a test controls
// when a response's flush returns) and returns an agent that talks to it,
// and the listener for connections of the test's own; the server, its
// connections and g are closed when the test ends.
func pipeAgent(t *testing.T, g *Gateway) (*agent, *pipeListener) {
	t.Helper()
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
	return a, pl
}

package httpgw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// slowCore is the fake core whose sessions take a while to pay and to
// take the RTT, so that a client can break its connection before the
// response to its start, or to its last probe, is written.
type slowCore struct{ *fakeCore }

func (c slowCore) Begin(p peer.ID, opt BeginOptions) (CoreSession, error) {
	s, err := c.fakeCore.Begin(p, opt)
	if err != nil {
		return nil, err
	}
	return slowSession{s.(*fakeSession)}, nil
}

type slowSession struct{ *fakeSession }

const slowStep = 300 * time.Millisecond

func (s slowSession) Pay(ctx context.Context, pow []byte) error {
	time.Sleep(slowStep)
	return s.fakeSession.Pay(ctx, pow)
}

func (s slowSession) SetRTT(d time.Duration) {
	time.Sleep(slowStep)
	s.fakeSession.SetRTT(d)
}

// postAndReset sends a POST of body on a connection of its own and
// resets the connection while the server works on it.
func postAndReset(t *testing.T, base, path string, body any) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: door\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, len(b), b)
	time.Sleep(slowStep / 3)
	_ = c.(*net.TCPConn).SetLinger(0)
	_ = c.Close()
}

// TestNetworkErrorsStayLocal: a session whose probe or challenge could
// not be written ended with the network error's text, which names the
// door's own socket address (behind a NAT or a load balancer, a private
// address and port): `expired_session: ... probe 1 not delivered: flush
// response: write tcp 127.0.0.1:42291->127.0.0.1:45382: write: broken
// pipe` for whoever holds the session ID, and the same in a result's
// detail. A body that could not be read whole was answered so too. The
// text now says what failed, not the socket's error (which the node logs
// at DEBUG).
func TestNetworkErrorsStayLocal(t *testing.T) {
	_, _, base := fakeDoor(t, func(c *Config) { c.Core = slowCore{c.Core.(*fakeCore)} })
	door := strings.TrimPrefix(base, "http://")
	leaks := func(what, text string) {
		t.Helper()
		t.Logf("%s: %q", what, text)
		if strings.Contains(text, door) || strings.Contains(text, "tcp") {
			t.Errorf("%s names the door's socket: %q", what, text)
		}
	}
	wait := func(a *agent, id string, state string) Session {
		t.Helper()
		var cur Session
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			cur = Session{}
			if a.get("/v1/sessions/"+id, &cur); cur.State == state {
				return cur
			}
		}
		t.Fatalf("session %s did not become %s: %+v", id, state, cur)
		return cur
	}

	// The start's response (probe 1) not delivered.
	a := newAgent(t, base)
	v := a.create()
	postAndReset(t, base, "/v1/sessions/"+v.SessionID+"/start", a.startReq(v))
	cur := wait(a, v.SessionID, StateExpired)
	leaks("a probe not delivered", cur.Error.Message)
	var eb ErrorBody
	if _, eb = a.post("/v1/sessions/"+v.SessionID+"/probe", probeRequest{Seq: ptr(1), Nonce: ptr([]byte{1})}, nil); eb.Code != CodeExpiredSession {
		t.Fatalf("a probe of the expired session: %+v", eb)
	}
	leaks("its step's error", eb.Message)

	// The last probe's response (round 1's challenge) not delivered.
	b := newAgent(t, base)
	v = b.create()
	var pr Session
	if st, eb := b.post("/v1/sessions/"+v.SessionID+"/start", b.startReq(v), &pr); st != http.StatusOK || pr.Probe == nil {
		t.Fatalf("start: %d %+v", st, eb)
	}
	postAndReset(t, base, "/v1/sessions/"+v.SessionID+"/probe", probeRequest{Seq: ptr(pr.Probe.Seq), Nonce: ptr(pr.Probe.Nonce)})
	cur = wait(b, v.SessionID, StateDone)
	if cur.Result == nil || cur.Result.Reason != "protocol_error" {
		t.Fatalf("a challenge not delivered: %+v", cur.Result)
	}
	leaks("a challenge not delivered", cur.Result.Detail)

	// A body cut by the network (the read deadline, a reset).
	r := httptest.NewRequest(http.MethodPost, "/v1/sessions", nil)
	r.Body = errReader{&net.OpError{Op: "read", Net: "tcp", Source: net.TCPAddrFromAddrPort(netip.MustParseAddrPort(door)),
		Addr: net.TCPAddrFromAddrPort(netip.MustParseAddrPort("192.0.2.1:4000")), Err: errors.New("i/o timeout")}}
	err := decode(httptest.NewRecorder(), r, MaxBodyBytes, &createRequest{}, nil)
	if !errors.Is(err, errBadRequest) {
		t.Fatalf("a body cut: %v", err)
	}
	leaks("a body cut", err.Error())
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }
func (r errReader) Close() error             { return nil }

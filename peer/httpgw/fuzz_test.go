package httpgw

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

// fuzzRoutes are the routes FuzzGatewayRequest sends its body to; {id}
// is the session the stage made (or a made-up ID at stage 0).
var fuzzRoutes = []struct{ method, path string }{
	{http.MethodPost, "/v1/sessions"},
	{http.MethodGet, "/v1/sessions/{id}"},
	{http.MethodPost, "/v1/sessions/{id}/start"},
	{http.MethodPost, "/v1/sessions/{id}/probe"},
	{http.MethodPost, "/v1/sessions/{id}/answer"},
	{http.MethodPost, "/v1/attestations/verify"},
	{http.MethodGet, "/openapi.json"},
	{http.MethodGet, "/.well-known/acaptcha.json"},
	{http.MethodPut, "/v1/sessions/{id}"},
}

// Fuzz stages: how far a valid client drove the session before the
// fuzzed request.
const (
	stageNone = iota
	stageCreated
	stageProbing
	stageAnswering
	stageDone
	stageCount
)

// fuzzDoor is one gateway over the fake core, a fresh one per input (its
// rate buckets and session tables start empty), and a client with a
// fixed key that drives sessions in process.
type fuzzDoor struct {
	t    testing.TB
	g    *Gateway
	priv crypto.PrivKey
	id   peer.ID
	key  answerKey
}

func newFuzzDoor(t testing.TB, priv crypto.PrivKey, key answerKey, set *skill.Set) *fuzzDoor {
	core := newFakeCore(t, set, skill.DefaultPolicy())
	core.pow = 0
	g, err := New(Config{Core: core, PowDifficulty: protocol.NoPow, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := peer.IDFromPrivateKey(priv)
	return &fuzzDoor{t: t, g: g, priv: priv, id: id, key: key}
}

// serve sends one request through the door's handler, from a client
// address outside loopback, and checks the response's shape: every
// status is one of the door's, every error body {code, message} with
// the status of its code's row, never internal.
func (d *fuzzDoor) serve(method, path, ctype string, body []byte) (int, []byte) {
	d.t.Helper()
	req := httptest.NewRequest(method, "http://door.test/", bytes.NewReader(body))
	req.URL.Path = path
	req.URL.RawPath = ""
	req.RemoteAddr = "198.51.100.7:40000"
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	rec := httptest.NewRecorder()
	start := time.Now()
	d.g.Handler().ServeHTTP(rec, req)
	if el := time.Since(start); el > 5*time.Second {
		d.t.Fatalf("%s %q took %s", method, path, el)
	}
	st, out := rec.Code, rec.Body.Bytes()
	switch {
	case st == http.StatusOK || st == http.StatusCreated:
		if !json.Valid(out) {
			d.t.Fatalf("%s %q: %d with a body that is not JSON: %q", method, path, st, out)
		}
	case st >= 400:
		var eb ErrorBody
		if err := json.Unmarshal(out, &eb); err != nil || eb.Code == "" || eb.Message == "" {
			d.t.Fatalf("%s %q: %d with a body that is not {code, message}: %q", method, path, st, out)
		}
		if eb.Code == CodeInternal {
			d.t.Fatalf("%s %q: internal error on client input: %s", method, path, eb.Message)
		}
		found := false
		for _, r := range errorTable {
			if r.Code == eb.Code && r.Status == st {
				found = true
			}
		}
		if !found {
			d.t.Fatalf("%s %q: code %s with status %d, not a row of the error table", method, path, eb.Code, st)
		}
		// wrong_round and bad_probe end the session with a signed
		// verdict, which the body carries (http.md §6).
		if (eb.Code == CodeWrongRound || eb.Code == CodeBadProbe) && (eb.Session == nil || eb.Session.State != StateDone || eb.Session.Result == nil) {
			d.t.Fatalf("%s %q: %s without the ended session: %q", method, path, eb.Code, out)
		}
	default:
		d.t.Fatalf("%s %q: status %d", method, path, st)
	}
	return st, out
}

// post sends v (JSON) and decodes a 2xx answer into a Session.
func (d *fuzzDoor) post(path string, v any) (int, Session) {
	d.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		d.t.Fatal(err)
	}
	st, out := d.serve(http.MethodPost, path, "application/json", b)
	var s Session
	if st < 400 {
		if err := json.Unmarshal(out, &s); err != nil {
			d.t.Fatalf("POST %s: %v", path, err)
		}
	}
	return st, s
}

// drive takes a session of the client to stage and returns its ID and
// its last view (an empty ID at stageNone).
func (d *fuzzDoor) drive(stage int) (string, Session) {
	d.t.Helper()
	if stage == stageNone {
		return "", Session{}
	}
	st, v := d.post("/v1/sessions", map[string]string{"peer_id": d.id.String()})
	if st != http.StatusCreated {
		d.t.Fatalf("create: %d", st)
	}
	id := v.SessionID
	if stage == stageCreated {
		return id, v
	}
	msg := StartMessage(v.SessionID, v.Nonce, d.g.cfg.Core.Self(), d.id)
	sig, err := d.priv.Sign(msg)
	if err != nil {
		d.t.Fatal(err)
	}
	pub, err := crypto.MarshalPublicKey(d.priv.GetPublic())
	if err != nil {
		d.t.Fatal(err)
	}
	if st, v = d.post("/v1/sessions/"+id+"/start", startRequest{PublicKey: pub, Signature: sig}); st != http.StatusOK {
		d.t.Fatalf("start: %d", st)
	}
	if stage == stageProbing {
		return id, v
	}
	for range 3 * protocol.MaxProbes {
		if v.State != StateProbing {
			break
		}
		if st, v = d.post("/v1/sessions/"+id+"/probe", probeRequest{Seq: ptr(v.Probe.Seq), Nonce: ptr(v.Probe.Nonce)}); st != http.StatusOK {
			d.t.Fatalf("probe: %d", st)
		}
	}
	if stage == stageAnswering {
		return id, v
	}
	for range 4 {
		if v.State != StateAnswering {
			break
		}
		if st, v = d.post("/v1/sessions/"+id+"/answer", answerRequest{Round: ptr(v.Challenge.Round), Answer: ptr(d.key.answer(v.Challenge))}); st != http.StatusOK {
			d.t.Fatalf("answer: %d", st)
		}
	}
	return id, v
}

// FuzzGatewayRequest sends what an HTTP client of the door controls (a
// route's body and Content-Type) through the door's handler, to a
// session a valid client drove to each state first. The door must
// answer every request with one of its statuses and a {code, message}
// body of its error table (never internal), within the request's time;
// a session it accepted a step of stays readable and in a state of the
// spec; a body over the route's cap is body_too_large.
func FuzzGatewayRequest(f *testing.F) {
	key, sets := newAnswerKey(f)
	priv, _, err := crypto.GenerateEd25519Key(bytes.NewReader(bytes.Repeat([]byte{7}, 64)))
	if err != nil {
		f.Fatal(err)
	}
	js := "application/json"
	for stage := range stageCount {
		f.Add(uint8(stage), uint8(0), js, []byte(`{"peer_id":"12D3KooWD3eckifWpRn9wQpMG9R9hX3sD158z7EqHWmweQAJU5SA"}`))
		f.Add(uint8(stage), uint8(1), "", []byte{})
		f.Add(uint8(stage), uint8(2), js, []byte(`{"public_key":"CAESIA==","signature":"AAAA","pow":""}`))
		f.Add(uint8(stage), uint8(3), js, []byte(`{"seq":1,"nonce":"AAAAAAAAAAA="}`))
		f.Add(uint8(stage), uint8(4), js, []byte(`{"round":1,"answer":"CA2"}`))
		f.Add(uint8(stage), uint8(4), "application/json; charset=UTF-8", []byte(`{"round":1e0,"answer":"\ud800"}`))
	}
	for _, env := range testutil.VectorEnvelopes(f) {
		b, _ := json.Marshal(verifyRequest{Attestation: env})
		f.Add(uint8(0), uint8(5), js, b)
	}
	f.Add(uint8(0), uint8(5), js, []byte(`{"attestation":"CgQIARIg","require_source":"hybrid","any_verdict":true}`))
	f.Add(uint8(0), uint8(5), js, []byte(`{"attestation":"","subject":"x","issuer":"y"}`))
	f.Add(uint8(0), uint8(5), "text/plain", []byte(`{}`))
	// The client's own key with a signature of the fuzzer's: the key
	// rules and the signature check.
	pub, _ := crypto.MarshalPublicKey(priv.GetPublic())
	sb, _ := json.Marshal(startRequest{PublicKey: pub, Signature: bytes.Repeat([]byte{1}, 64), Pow: []byte{0}})
	f.Add(uint8(stageCreated), uint8(2), js, sb)
	f.Add(uint8(1), uint8(0), js, []byte(`{"peer_id":"x","peer_id":"y"}`))
	f.Add(uint8(3), uint8(4), js, []byte(`{"Round":1,"answer":"x"} {}`))
	f.Add(uint8(0), uint8(6), "", []byte{})
	f.Add(uint8(0), uint8(7), "", []byte{})
	f.Add(uint8(2), uint8(8), js, []byte(`{}`))
	f.Add(uint8(0), uint8(0), js, bytes.Repeat([]byte(" "), MaxBodyBytes+1))
	f.Fuzz(func(t *testing.T, stage, route uint8, ctype string, body []byte) {
		d := newFuzzDoor(t, priv, key, sets[0])
		defer d.g.Close()
		id, _ := d.drive(int(stage) % stageCount)
		rt := fuzzRoutes[int(route)%len(fuzzRoutes)]
		sid := id
		if sid == "" {
			sid = "no-such-session"
		}
		st, out := d.serve(rt.method, strings.ReplaceAll(rt.path, "{id}", sid), ctype, body)
		if rt.method == http.MethodPost && checkJSONContentType(http.Header{"Content-Type": {ctype}}) != nil && st != http.StatusUnsupportedMediaType && st != http.StatusTooManyRequests {
			t.Fatalf("POST with Content-Type %q answered %d, not unsupported_media_type", ctype, st)
		}
		capped := int64(MaxBodyBytes)
		if rt.path == "/v1/attestations/verify" {
			capped = MaxVerifyBodyBytes
		}
		if rt.method == http.MethodPost && int64(len(body)) > capped && st < 400 {
			t.Fatalf("a body of %d bytes over the cap of %d was taken: %d", len(body), capped, st)
		}
		if st < 400 && strings.HasPrefix(rt.path, "/v1/sessions/{id}") {
			var v Session
			if err := json.Unmarshal(out, &v); err != nil {
				t.Fatal(err)
			}
			switch v.State {
			case StateAwaitingStart, StateProbing, StateAnswering, StateDone, StateExpired:
			default:
				t.Fatalf("session in state %q", v.State)
			}
			if v.SessionID != id {
				t.Fatalf("answered for session %q, asked for %q", v.SessionID, id)
			}
		}
		if id != "" {
			// The session still reads back, in a state of the spec.
			st, out := d.serve(http.MethodGet, "/v1/sessions/"+id, "", nil)
			if st == http.StatusOK {
				var v Session
				if err := json.Unmarshal(out, &v); err != nil || v.SessionID != id {
					t.Fatalf("GET after the request: %v %q", err, out)
				}
			}
		}
	})
}

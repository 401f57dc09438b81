package httpgw

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/acaptcha/acaptcha/internal/strictjson"
)

// TestStrictJSON covers the body rules of http.md §1 that encoding/json
// alone does not apply.
func TestStrictJSON(t *testing.T) {
	for _, c := range []struct {
		body string
		bad  string // a part of the error, "" when the body passes
	}{
		{`{"answer":"C-14","session":"x"}`, ""},
		{`{"a":{"b":1,"c":[1,{"b":2}]},"b":{"b":3}}`, ""},
		{`{"answer":"\ud83d\ude00"}`, ""},                   // a pair
		{`{"answer":"\\ud800"}`, ""},                        // an escaped backslash, then text
		{`{"answer":"x","answer":"y"}`, "duplicate member"}, // encoding/json takes "y"
		{`{"a":{"k":1,"k":2}}`, "duplicate member"},
		{`{"a":[{"k":1,"k":2}]}`, "duplicate member"},
		{`{"answer":"\ud800"}`, "unpaired surrogate"}, // encoding/json gives U+FFFD
		{`{"answer":"\udc00\ud800"}`, "unpaired surrogate"},
		{`{"answer":"\ud800x"}`, "unpaired surrogate"},
		{`{"answer":"\ud800\n"}`, "unpaired surrogate"},
		{"{\"answer\":\"\xff\"}", "not UTF-8"},
		{`{"a":1,`, ""}, // a syntax error is the decoder's to report
	} {
		err := strictjson.Check([]byte(c.body), nil)
		switch {
		case c.bad == "" && err != nil:
			t.Errorf("%s: %v", c.body, err)
		case c.bad != "" && (err == nil || !strings.Contains(err.Error(), c.bad)):
			t.Errorf("%s: %v, want %q", c.body, err, c.bad)
		}
	}
}

// TestDecodeStrict: every handler's body goes through decode, which
// answers bad_request for what strictjson.Check refuses.
func TestDecodeStrict(t *testing.T) {
	for body, bad := range map[string]bool{
		`{"answer":"x"}`:              false,
		`{"answer":"x","answer":"y"}`: true,
		`{"answer":"\ud800"}`:         true,
		`{"answer":"x"} {}`:           true,
	} {
		var v struct{ Answer string }
		r := httptest.NewRequest(http.MethodPost, "/v1/sessions/x/answer", strings.NewReader(body))
		err := decode(httptest.NewRecorder(), r, 1<<10, &v, nil)
		if bad != (err != nil) || bad && classify(err).Code != CodeBadRequest {
			t.Errorf("%s: %v", body, err)
		}
	}
}

// TestDecodeExactNames: encoding/json matches member names ignoring case
// (Unicode simple folding), the last match winning, so {"answer": "x",
// "ANSWER": "y"} was judged "y" and {"Round": 2} read as round 2, where
// http.md §1 has exact names. The session routes refuse a member that
// differs from one of theirs only in case (bad_request) and still ignore
// other unknown members.
func TestDecodeExactNames(t *testing.T) {
	for body, bad := range map[string]bool{
		`{"round":1,"answer":"x"}`:               false,
		`{"round":1,"answer":"x","session":"s"}`: false,
		`{"round":1,"answer":"x","ANSWER":"y"}`:  true,
		`{"Round":2,"answer":"x"}`:               true,
		`{"round":1,"Answer":"x"}`:               true,
		`{"round":1,"answer":"x","ſeq":1}`:       false, // no member of this route folds to it
	} {
		var v answerRequest
		r := httptest.NewRequest(http.MethodPost, "/v1/sessions/x/answer", strings.NewReader(body))
		err := decode(httptest.NewRecorder(), r, 1<<10, &v, exactNames("round", "answer"))
		if bad != (err != nil) || bad && classify(err).Code != CodeBadRequest {
			t.Errorf("%s: %v", body, err)
		}
	}
	// Unicode folding: "ſ" (U+017F) folds to "s", as the decoder matches.
	var p probeRequest
	r := httptest.NewRequest(http.MethodPost, "/v1/sessions/x/probe", strings.NewReader(`{"seq":1,"nonce":"AA==","ſeq":2}`))
	if err := decode(httptest.NewRecorder(), r, 1<<10, &p, exactNames("seq", "nonce")); err == nil || classify(err).Code != CodeBadRequest {
		t.Errorf("a member folding to seq: %v", err)
	}
}

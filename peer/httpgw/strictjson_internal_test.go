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

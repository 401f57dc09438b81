package generate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/acaptcha/acaptcha/skill"
)

// ErrMalformed is wrapped when a model reply is not exactly one JSON
// object of the set schema.
var ErrMalformed = errors.New("malformed generator output")

// MaxOutputBytes caps a reply the decoder accepts.
const MaxOutputBytes = 1 << 20

// DecodeOutput parses a model reply into a set. The reply must be one
// JSON object of the paper's set schema (unknown keys are errors), with
// nothing before or after it except white space; the one concession to
// how models write is a single Markdown code fence around the whole
// object (``` or ```json). The set is not validated here: see Validator.
func DecodeOutput(text string) (*skill.Set, error) {
	if len(text) > MaxOutputBytes {
		return nil, fmt.Errorf("%w: reply of %d bytes exceeds %d", ErrMalformed, len(text), MaxOutputBytes)
	}
	body, err := unfence(strings.TrimSpace(text))
	if err != nil {
		return nil, err
	}
	if body == "" {
		return nil, fmt.Errorf("%w: empty reply", ErrMalformed)
	}
	if body[0] != '{' {
		return nil, fmt.Errorf("%w: reply does not start with a JSON object (starts %q)", ErrMalformed, snippet(body, 40))
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(body)))
	dec.DisallowUnknownFields()
	var s skill.Set
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: data after the JSON object", ErrMalformed)
	}
	for pi := range s.Parts {
		for qi := range s.Parts[pi].Questions {
			cleanDistractors(&s.Parts[pi].Questions[qi])
		}
	}
	return &s, nil
}

// cleanDistractors tidies the distractors a model listed for q: each is
// trimmed; empty ones, ones over skill.MaxAnswerBytes, repeats (after
// skill.Normalize) and any that skill.Judge would accept as an answer to q
// (a variant, or a longer form of one) are dropped; at most
// skill.MaxDistractors are kept, in the model's order. A model's careless
// list thus costs only its bad entries, never the set: skill.Set.Validate
// rejects a set whose distractor is also an accepted answer.
func cleanDistractors(q *skill.Question) {
	if len(q.Distractors) == 0 {
		q.Distractors = nil
		return
	}
	bare := skill.Question{Question: q.Question, Answer: q.Answer, Answers: q.Answers}
	seen := map[string]bool{}
	var out []string
	for _, d := range q.Distractors {
		d = strings.TrimSpace(d)
		k := skill.Normalize(d)
		if d == "" || len(d) > skill.MaxAnswerBytes || seen[k] || skill.Judge(&bare, d, nil) {
			continue
		}
		seen[k] = true
		out = append(out, d)
		if len(out) == skill.MaxDistractors {
			break
		}
	}
	q.Distractors = out
}

// unfence removes one surrounding Markdown code fence. A fence must open
// the reply (optionally tagged json) and close it; a reply with text
// around the fence, or more than one fence, is malformed.
func unfence(s string) (string, error) {
	if !strings.HasPrefix(s, "```") {
		return s, nil
	}
	nl := strings.IndexByte(s, '\n')
	if nl < 0 {
		return "", fmt.Errorf("%w: unterminated code fence", ErrMalformed)
	}
	if tag := strings.TrimSpace(s[3:nl]); tag != "" && !strings.EqualFold(tag, "json") {
		return "", fmt.Errorf("%w: code fence tagged %q", ErrMalformed, snippet(tag, 20))
	}
	rest := strings.TrimRight(s[nl+1:], " \t\r\n")
	if !strings.HasSuffix(rest, "```") {
		return "", fmt.Errorf("%w: code fence not closed at the end of the reply", ErrMalformed)
	}
	inner := strings.TrimSpace(strings.TrimSuffix(rest, "```"))
	if strings.Contains(inner, "```") {
		return "", fmt.Errorf("%w: more than one code fence", ErrMalformed)
	}
	return inner, nil
}

func snippet(s string, n int) string {
	r := []rune(s)
	if len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

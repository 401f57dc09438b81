package generate_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/acaptcha/acaptcha/skill/generate"
)

func TestDecodeOutput(t *testing.T) {
	good := reply(t, goodSet(t))
	ok := map[string]string{
		"plain":          good,
		"white space":    "\n\t " + good + " \n",
		"json fence":     "```json\n" + good + "\n```",
		"bare fence":     "```\n" + good + "\n```\n",
		"JSON fence tag": "```JSON\n" + good + "\n```",
	}
	for name, text := range ok {
		s, err := generate.DecodeOutput(text)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if s.Domain != "aviation_maintenance" || len(s.Parts) != 3 || s.ID != "" {
			t.Errorf("%s: decoded %q, %d parts, id %q", name, s.Domain, len(s.Parts), s.ID)
		}
	}
	bad := map[string]string{
		"empty":           "",
		"prose before":    "Here you go: " + good,
		"prose after":     good + "\nHope this helps!",
		"two objects":     good + good,
		"array":           "[" + good + "]",
		"unclosed fence":  "```json\n" + good,
		"other tag":       "```python\n" + good + "\n```",
		"two fences":      "```json\n" + good + "\n```\n```json\n" + good + "\n```",
		"text in fence":   "```json\nHere:\n" + good + "\n```",
		"cut off":         good[:len(good)/2],
		"unknown field":   strings.Replace(good, `"domain"`, `"topic":"x","domain"`, 1),
		"wrong type":      strings.Replace(good, `"reasoning_type":"negation"`, `"reasoning_type":7`, 1),
		"trailing commas": strings.Replace(good, `]}]}`, `],}]}`, 1),
		"too large":       `{"domain":"` + strings.Repeat("x", generate.MaxOutputBytes) + `"}`,
	}
	for name, text := range bad {
		if _, err := generate.DecodeOutput(text); !errors.Is(err, generate.ErrMalformed) {
			t.Errorf("%s: err %v, want ErrMalformed", name, err)
		}
	}
}

func FuzzDecodeOutput(f *testing.F) {
	f.Add(reply(f, goodSet(f)))
	f.Add("```json\n{}\n```")
	f.Add(`{"domain":"x","parts":[{"narrative":"n","questions":[{"question":"q","answer":"a"}]}]}`)
	f.Add("```")
	f.Add("{} trailing")
	f.Fuzz(func(t *testing.T, text string) {
		s, err := generate.DecodeOutput(text)
		if err != nil {
			if !errors.Is(err, generate.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if s == nil {
			t.Fatal("nil set without error")
		}
		// Whatever decodes must survive validation without panicking.
		_ = s.Validate()
	})
}

// Decoding keeps a question's distractors, trimmed, without repeats, empty
// or oversized entries, or entries that are an accepted answer; the set
// stays valid.
func TestDecodeOutputDistractors(t *testing.T) {
	s := clone(t, goodSet(t))
	q := &s.Parts[0].Questions[0]
	long := strings.Repeat("x", 65)
	q.Distractors = []string{" ZZ-101 ", "zz-101", "", long, q.Answer, strings.ToUpper(q.Answers[len(q.Answers)-1]), "the other tail", "ZZ-102"}
	many := &s.Parts[1].Questions[0]
	for i := range 40 {
		many.Distractors = append(many.Distractors, "candidate "+strings.Repeat("i", i+1))
	}
	got, err := generate.DecodeOutput(reply(t, s))
	if err != nil {
		t.Fatal(err)
	}
	if d := got.Parts[0].Questions[0].Distractors; strings.Join(d, "|") != "ZZ-101|the other tail|ZZ-102" {
		t.Errorf("distractors %q", d)
	}
	if n := len(got.Parts[1].Questions[0].Distractors); n != 32 {
		t.Errorf("%d distractors kept, want the cap 32", n)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("decoded set invalid: %v", err)
	}
}

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

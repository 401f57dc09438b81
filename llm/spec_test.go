package llm

import (
	"strings"
	"testing"
)

func TestParseSpec(t *testing.T) {
	ok := []struct {
		in   string
		want Spec
	}{
		{"openai:gpt-4o-mini", Spec{OpenAI, "gpt-4o-mini"}},
		{"anthropic:claude-3-5-haiku-latest", Spec{Anthropic, "claude-3-5-haiku-latest"}},
		{"ollama:llama3.1:8b", Spec{Ollama, "llama3.1:8b"}},
		{"googleai:gemini-2.0-flash", Spec{GoogleAI, "gemini-2.0-flash"}},
		{"  OpenAI : gpt-4o ", Spec{OpenAI, "gpt-4o"}},
		{"openai:org/model-name", Spec{OpenAI, "org/model-name"}},
	}
	for _, c := range ok {
		got, err := ParseSpec(c.in)
		if err != nil {
			t.Errorf("ParseSpec(%q): %v", c.in, err)
			continue
		}
		if got != c.want {
			t.Errorf("ParseSpec(%q) = %+v, want %+v", c.in, got, c.want)
		}
		if again, err := ParseSpec(got.String()); err != nil || again != got {
			t.Errorf("ParseSpec(%q.String()) = %+v, %v", c.in, again, err)
		}
	}

	bad := []struct{ in, mention string }{
		{"", "empty"},
		{"   ", "empty"},
		{"gpt-4o", "no model"},
		{"openai:", "empty model"},
		{"openai:  ", "empty model"},
		{"mistral:large", `unknown provider "mistral"`},
		{"gemini:gemini-2.0-flash", "openai, anthropic, ollama, googleai"},
		{":model", "unknown provider"},
		{"openai:gpt 4o", "white space"},
	}
	for _, c := range bad {
		_, err := ParseSpec(c.in)
		if err == nil {
			t.Errorf("ParseSpec(%q) succeeded", c.in)
			continue
		}
		if !strings.Contains(err.Error(), c.mention) {
			t.Errorf("ParseSpec(%q) error %q does not mention %q", c.in, err, c.mention)
		}
	}
}

func TestProviderValid(t *testing.T) {
	for _, p := range Providers {
		if !p.Valid() {
			t.Errorf("%s not valid", p)
		}
	}
	if Provider("OpenAI").Valid() || Provider("").Valid() {
		t.Error("invalid provider accepted")
	}
}

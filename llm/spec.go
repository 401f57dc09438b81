package llm

import (
	"fmt"
	"strings"
)

// Provider names an LLM provider API that New knows how to reach.
type Provider string

// The providers New supports.
const (
	OpenAI    Provider = "openai"    // OpenAI Chat Completions and compatible servers
	Anthropic Provider = "anthropic" // Anthropic Messages
	Ollama    Provider = "ollama"    // Ollama /api/chat
	GoogleAI  Provider = "googleai"  // Google AI (Gemini) generateContent
)

// Providers lists every supported provider.
var Providers = []Provider{OpenAI, Anthropic, Ollama, GoogleAI}

// Valid reports whether p is a supported provider.
func (p Provider) Valid() bool {
	for _, x := range Providers {
		if p == x {
			return true
		}
	}
	return false
}

// Spec selects a provider and a model, written "provider:model".
type Spec struct {
	Provider Provider
	Model    string
}

// String returns the "provider:model" form.
func (s Spec) String() string { return string(s.Provider) + ":" + s.Model }

// ParseSpec parses "provider:model", for example "openai:gpt-4o-mini",
// "anthropic:claude-3-5-haiku-latest", "ollama:llama3.1:8b" or
// "googleai:gemini-2.0-flash". The provider is case-insensitive; the model
// is everything after the first colon (so Ollama tags keep their colon).
func ParseSpec(s string) (Spec, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Spec{}, fmt.Errorf("llm spec is empty, want provider:model with provider one of %s", providerList())
	}
	prov, model, ok := strings.Cut(s, ":")
	if !ok {
		return Spec{}, fmt.Errorf("llm spec %q has no model, want provider:model with provider one of %s", s, providerList())
	}
	p := Provider(strings.ToLower(strings.TrimSpace(prov)))
	if !p.Valid() {
		return Spec{}, fmt.Errorf("llm spec %q: unknown provider %q, want one of %s", s, prov, providerList())
	}
	model = strings.TrimSpace(model)
	if model == "" {
		return Spec{}, fmt.Errorf("llm spec %q: empty model name after %q", s, string(p)+":")
	}
	if strings.ContainsAny(model, " \t\r\n") {
		return Spec{}, fmt.Errorf("llm spec %q: model name contains white space", s)
	}
	return Spec{Provider: p, Model: model}, nil
}

func providerList() string {
	names := make([]string, len(Providers))
	for i, p := range Providers {
		names[i] = string(p)
	}
	return strings.Join(names, ", ")
}

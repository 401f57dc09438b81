package testutil

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/llm"
)

// Providers lists the providers the stub servers speak.
var Providers = []string{"openai", "anthropic", "ollama", "googleai"}

// NewServer starts the stub server of provider.
func NewServer(provider string, b Brain) (*StubServer, error) {
	switch provider {
	case "openai":
		return NewOpenAIServer(b), nil
	case "anthropic":
		return NewAnthropicServer(b), nil
	case "ollama":
		return NewOllamaServer(b), nil
	case "googleai":
		return NewGoogleAIServer(b), nil
	}
	return nil, fmt.Errorf("testutil: no stub server for provider %q", provider)
}

// StubModelName is the model name NewModelFor configures.
const StubModelName = "stub-model"

// Config returns an llm.Config pointing at the server: spec
// "PROVIDER:stub-model", the server's base URL, a test API key and a
// 10-second call timeout.
func (s *StubServer) Config() llm.Config {
	return llm.Config{
		Spec:    s.Provider + ":" + StubModelName,
		BaseURL: s.BaseURL(),
		APIKey:  "test-key",
		Timeout: 10 * time.Second,
	}
}

// NewModelFor starts a stub server for provider with brain b and builds
// a real llm.Model (the provider's langchaingo client) talking to it.
// edit, when given, adjusts the configuration first. Both are closed when
// the test ends.
func NewModelFor(t testing.TB, provider string, b Brain, edit ...func(*llm.Config)) (*llm.Model, *StubServer) {
	t.Helper()
	s, err := NewServer(provider, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	cfg := s.Config()
	for _, e := range edit {
		e(&cfg)
	}
	m, err := llm.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("llm.New(%s): %v", cfg.Spec, err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("close model: %v", err)
		}
	})
	return m, s
}

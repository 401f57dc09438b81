package llm

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestVersionedBaseURL(t *testing.T) {
	cases := []struct{ in, want string }{
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080/v1"},
		{"http://127.0.0.1:8080/", "http://127.0.0.1:8080/v1"},
		{"http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1"},
		{"http://127.0.0.1:8080/v1/", "http://127.0.0.1:8080/v1"},
		{"localhost:11434", "http://localhost:11434/v1"},
		{"https://api.openai.com/v1/chat/completions", "https://api.openai.com/v1"},
		{"https://openrouter.ai/api/v1", "https://openrouter.ai/api/v1"},
		{"https://generativelanguage.googleapis.com/v1beta/openai/", "https://generativelanguage.googleapis.com/v1beta/openai"},
		{"https://proxy.example/llm", "https://proxy.example/llm/v1"},
		{"https://api.anthropic.com", "https://api.anthropic.com/v1"},
	}
	for _, c := range cases {
		got, err := versionedBaseURL(c.in, "/chat/completions")
		if err != nil || got != c.want {
			t.Errorf("versionedBaseURL(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if got, _ := versionedBaseURL("https://api.anthropic.com/v1/messages", "/messages"); got != "https://api.anthropic.com/v1" {
		t.Errorf("anthropic endpoint suffix: %q", got)
	}
	for _, bad := range []string{"", "ftp://host/v1", "http://", "http://host/v1?x=1", "http://[::1"} {
		if got, err := versionedBaseURL(bad, ""); err == nil {
			t.Errorf("versionedBaseURL(%q) = %q, want error", bad, got)
		}
	}
}

func TestOllamaURL(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", DefaultOllamaURL},
		{"127.0.0.1", "http://127.0.0.1:11434"},
		{"0.0.0.0:8080", "http://0.0.0.0:8080"},
		{":9999", "http://127.0.0.1:9999"},
		{"http://gpu-box:11434/", "http://gpu-box:11434"},
		{"http://gpu-box:11434/api", "http://gpu-box:11434"},
		{"http://gpu-box:11434/v1", "http://gpu-box:11434"},
		{"https://ollama.example", "https://ollama.example"},
	}
	for _, c := range cases {
		got, err := ollamaURL(c.in)
		if err != nil || got != c.want {
			t.Errorf("ollamaURL(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if _, err := ollamaURL("http://[::1"); err == nil {
		t.Error("bad URL accepted")
	}
}

func TestGoogleBaseURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:1234":         "http://127.0.0.1:1234",
		"http://127.0.0.1:1234/v1beta/": "http://127.0.0.1:1234",
		"https://proxy.example/gemini":  "https://proxy.example/gemini",
	} {
		if got, err := googleBaseURL(in); err != nil || got != want {
			t.Errorf("googleBaseURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func clearEnv(t *testing.T) {
	for _, k := range []string{EnvOpenAIKey, EnvOpenAIBaseURL, EnvOpenAIAPIBase, EnvAnthropicKey, EnvAnthropicBaseURL, EnvOllamaHost, EnvGoogleKey, EnvGeminiKey} {
		t.Setenv(k, "")
	}
}

func TestNewErrors(t *testing.T) {
	clearEnv(t)
	ctx := context.Background()
	cases := []struct {
		cfg     Config
		mention string
	}{
		{Config{Spec: "nope:model"}, "unknown provider"},
		{Config{Spec: "openai:"}, "empty model"},
		{Config{Spec: "openai:gpt-4o-mini"}, EnvOpenAIKey},
		{Config{Spec: "anthropic:claude"}, EnvAnthropicKey},
		{Config{Spec: "googleai:gemini-2.0-flash"}, EnvGeminiKey},
		{Config{Spec: "openai:m", BaseURL: "ftp://host"}, "scheme"},
		{Config{Spec: "anthropic:m", BaseURL: "http://[::1"}, "base URL"},
		{Config{Spec: "ollama:m", BaseURL: "http://[::1"}, "server URL"},
		{Config{Spec: "googleai:m", BaseURL: "http://host?x=1"}, "query"},
	}
	for _, c := range cases {
		m, err := New(ctx, c.cfg)
		if err == nil {
			_ = m.Close()
			t.Errorf("New(%+v) succeeded", c.cfg)
			continue
		}
		if !strings.Contains(err.Error(), c.mention) {
			t.Errorf("New(%+v): error %q does not mention %q", c.cfg, err, c.mention)
		}
	}
}

func TestNewReadsEnvironment(t *testing.T) {
	clearEnv(t)
	t.Setenv(EnvOpenAIKey, "sk-test")
	t.Setenv(EnvAnthropicKey, "ak-test")
	t.Setenv(EnvGeminiKey, "gk-test")
	t.Setenv(EnvOllamaHost, "127.0.0.1:1")
	for _, spec := range []string{"openai:gpt-4o-mini", "anthropic:claude-3-5-haiku-latest", "ollama:llama3.1", "googleai:gemini-2.0-flash"} {
		m, err := New(context.Background(), Config{Spec: spec, Timeout: time.Second})
		if err != nil {
			t.Errorf("New(%s): %v", spec, err)
			continue
		}
		if m.Name() != spec || m.Provider() != strings.SplitN(spec, ":", 2)[0] {
			t.Errorf("name %q provider %q", m.Name(), m.Provider())
		}
		if err := m.Close(); err != nil {
			t.Errorf("close %s: %v", spec, err)
		}
	}
}

func TestKeyOrPlaceholder(t *testing.T) {
	if k, err := keyOrPlaceholder("k", "", "ENV"); k != "k" || err != nil {
		t.Errorf("%q %v", k, err)
	}
	if k, err := keyOrPlaceholder("", "http://local", "ENV"); k != PlaceholderAPIKey || err != nil {
		t.Errorf("%q %v", k, err)
	}
	if _, err := keyOrPlaceholder("", "", "ENV"); err == nil || !strings.Contains(err.Error(), "ENV") {
		t.Errorf("%v", err)
	}
}

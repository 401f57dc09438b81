package llm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/anthropic"
	"github.com/tmc/langchaingo/llms/googleai"
	"github.com/tmc/langchaingo/llms/ollama"
	"github.com/tmc/langchaingo/llms/openai"
	"google.golang.org/api/option"
)

// Environment variables New reads when Config leaves a field empty.
const (
	EnvOpenAIKey        = "OPENAI_API_KEY"
	EnvOpenAIBaseURL    = "OPENAI_BASE_URL"
	EnvOpenAIAPIBase    = "OPENAI_API_BASE" // older spelling, read after OPENAI_BASE_URL
	EnvAnthropicKey     = "ANTHROPIC_API_KEY"
	EnvAnthropicBaseURL = "ANTHROPIC_BASE_URL"
	EnvOllamaHost       = "OLLAMA_HOST"
	EnvGoogleKey        = "GOOGLE_API_KEY"
	EnvGeminiKey        = "GEMINI_API_KEY" // read after GOOGLE_API_KEY
)

// PlaceholderAPIKey is sent when a custom base URL is configured without
// a key: langchaingo's OpenAI, Anthropic and Google clients refuse to start
// without one, while local OpenAI-compatible servers ignore it.
const PlaceholderAPIKey = "acaptcha-no-key"

// Default endpoints.
const (
	DefaultOpenAIBaseURL    = "https://api.openai.com/v1"
	DefaultAnthropicBaseURL = "https://api.anthropic.com/v1"
	DefaultOllamaURL        = "http://127.0.0.1:11434"
)

// Config selects and configures a provider model for New.
type Config struct {
	// Spec is "provider:model" (see ParseSpec).
	Spec string
	// BaseURL overrides the provider endpoint. OpenAI and Anthropic base
	// URLs are normalised to end in a version segment (/v1 is appended to
	// a URL without one); Ollama takes the server root (a trailing /api or
	// /v1 is removed); Google AI takes the server root (a trailing /v1beta
	// is removed). Empty: the provider's environment variable, else the
	// public endpoint.
	BaseURL string
	// APIKey is the provider key. Empty: the provider's environment
	// variable; with a custom BaseURL and no key anywhere,
	// PlaceholderAPIKey. Ollama takes no key.
	APIKey string
	// MaxTokens caps the output tokens of calls that set no cap
	// themselves (DefaultMaxTokens when 0).
	MaxTokens int
	// Timeout bounds each call (DefaultTimeout when 0).
	Timeout time.Duration
	// HTTPClient is copied, never modified: New wraps its transport
	// (http.DefaultTransport when nil) to observe the provider's replies.
	HTTPClient *http.Client
	// Temperature, when set, is sent with every call. When nil the client
	// library's default applies (langchaingo sends 0 for OpenAI, Anthropic
	// and Ollama, and 0.5 for Google AI).
	Temperature *float64
	// Retry retries rate-limited calls.
	Retry RetryPolicy
	// LegacyMaxTokensField makes the OpenAI client send max_tokens instead
	// of max_completion_tokens, for older OpenAI-compatible servers.
	LegacyMaxTokensField bool
	// Logger receives call and retry logs (slog.Default() when nil).
	Logger *slog.Logger
}

// New builds the provider's langchaingo client for cfg and wraps it.
func New(ctx context.Context, cfg Config) (*Model, error) {
	spec, err := ParseSpec(cfg.Spec)
	if err != nil {
		return nil, err
	}
	opts := []Option{
		WithTimeout(cfg.Timeout),
		WithRetry(cfg.Retry),
		WithMaxTokens(cfg.MaxTokens),
		WithLogger(cfg.Logger),
	}
	if cfg.Temperature != nil {
		opts = append(opts, WithCallOptions(llms.WithTemperature(*cfg.Temperature)))
	}

	var header http.Header
	sniff := sniffNone
	switch spec.Provider {
	case Ollama:
		sniff = sniffOllamaDone
	case GoogleAI:
		sniff = sniffGoogleUsage
	}
	hc, closeIdle := observedClient(cfg.HTTPClient, sniff, &header)
	opts = append(opts, WithCloser(func() error { closeIdle(); return nil }))

	var m llms.Model
	var key string
	switch spec.Provider {
	case OpenAI:
		m, key, err = newOpenAI(spec, cfg, hc)
		if cfg.LegacyMaxTokensField {
			opts = append(opts, WithCallOptions(openai.WithLegacyMaxTokensField()))
		}
	case Anthropic:
		m, key, err = newAnthropic(spec, cfg, hc)
	case Ollama:
		m, err = newOllama(spec, cfg, hc)
	case GoogleAI:
		m, header, err = newGoogleAI(ctx, spec, cfg, hc)
		key = header.Get("X-Goog-Api-Key")
	default:
		err = fmt.Errorf("provider %q is not supported", spec.Provider)
	}
	if err != nil {
		closeIdle()
		return nil, fmt.Errorf("%s: %w", spec, err)
	}
	w := Wrap(m, string(spec.Provider), opts...)
	w.name = spec.String()
	// A key too short to be a real one (a local server's "x") would
	// mask ordinary words.
	if len(key) >= 8 && key != PlaceholderAPIKey {
		w.secrets = []string{key}
	}
	return w, nil
}

// observedClient returns a copy of hc (or a new client) whose transport
// records what Generate needs to see, and a function closing the idle
// connections of a transport it created. header is read at request time,
// so the caller may fill it in after building the client.
func observedClient(hc *http.Client, sniff sniffMode, header *http.Header) (*http.Client, func()) {
	var c http.Client
	closeIdle := func() {}
	if hc != nil {
		c = *hc
	}
	base := c.Transport
	if base == nil {
		if dt, ok := http.DefaultTransport.(*http.Transport); ok {
			own := dt.Clone()
			base = own
			closeIdle = own.CloseIdleConnections
		} else {
			base = http.DefaultTransport
		}
	}
	c.Transport = &headerTransport{header: header, next: &observingTransport{base: base, sniff: sniff}}
	return &c, closeIdle
}

// headerTransport adds the headers *header holds when the request lacks
// them.
type headerTransport struct {
	header *http.Header
	next   http.RoundTripper
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if h := *t.header; len(h) > 0 {
		req = req.Clone(req.Context())
		for k, vs := range h {
			if req.Header.Get(k) == "" {
				req.Header[k] = vs
			}
		}
	}
	return t.next.RoundTrip(req)
}

// newOpenAI builds the OpenAI client; it also returns the key it sends.
func newOpenAI(spec Spec, cfg Config, hc *http.Client) (llms.Model, string, error) {
	base := firstNonEmpty(cfg.BaseURL, os.Getenv(EnvOpenAIBaseURL), os.Getenv(EnvOpenAIAPIBase))
	key, err := keyOrPlaceholder(firstNonEmpty(cfg.APIKey, os.Getenv(EnvOpenAIKey)), base, EnvOpenAIKey)
	if err != nil {
		return nil, "", err
	}
	if base == "" {
		base = DefaultOpenAIBaseURL
	}
	if base, err = versionedBaseURL(base, "/chat/completions"); err != nil {
		return nil, "", fmt.Errorf("base URL: %w", err)
	}
	m, err := openai.New(openai.WithModel(spec.Model), openai.WithToken(key), openai.WithBaseURL(base), openai.WithHTTPClient(hc))
	if err != nil {
		return nil, "", fmt.Errorf("build client: %w", err)
	}
	return m, key, nil
}

// newAnthropic builds the Anthropic client; it also returns the key it
// sends.
func newAnthropic(spec Spec, cfg Config, hc *http.Client) (llms.Model, string, error) {
	base := firstNonEmpty(cfg.BaseURL, os.Getenv(EnvAnthropicBaseURL))
	key, err := keyOrPlaceholder(firstNonEmpty(cfg.APIKey, os.Getenv(EnvAnthropicKey)), base, EnvAnthropicKey)
	if err != nil {
		return nil, "", err
	}
	if base == "" {
		base = DefaultAnthropicBaseURL
	}
	if base, err = versionedBaseURL(base, "/messages"); err != nil {
		return nil, "", fmt.Errorf("base URL: %w", err)
	}
	m, err := anthropic.New(anthropic.WithModel(spec.Model), anthropic.WithToken(key), anthropic.WithBaseURL(base), anthropic.WithHTTPClient(hc))
	if err != nil {
		return nil, "", fmt.Errorf("build client: %w", err)
	}
	return m, key, nil
}

func newOllama(spec Spec, cfg Config, hc *http.Client) (llms.Model, error) {
	base, err := ollamaURL(firstNonEmpty(cfg.BaseURL, os.Getenv(EnvOllamaHost)))
	if err != nil {
		return nil, fmt.Errorf("server URL: %w", err)
	}
	// ollama.WithServerURL calls log.Fatal on a URL it cannot parse: base
	// has been parsed above.
	m, err := ollama.New(ollama.WithModel(spec.Model), ollama.WithServerURL(base), ollama.WithHTTPClient(hc))
	if err != nil {
		return nil, fmt.Errorf("build client: %w", err)
	}
	return m, nil
}

// newGoogleAI builds the Google AI client. A custom endpoint is set with
// the Google client option WithEndpoint (langchaingo exposes the client
// options in googleai.Options.ClientOptions). The Google client drops its
// API-key option when it is handed an HTTP client, so the key travels in
// the x-goog-api-key header that the returned header map makes the
// transport add.
func newGoogleAI(ctx context.Context, spec Spec, cfg Config, hc *http.Client) (llms.Model, http.Header, error) {
	key, err := keyOrPlaceholder(firstNonEmpty(cfg.APIKey, os.Getenv(EnvGoogleKey), os.Getenv(EnvGeminiKey)), cfg.BaseURL, EnvGoogleKey+" or "+EnvGeminiKey)
	if err != nil {
		return nil, nil, err
	}
	gopts := []googleai.Option{
		googleai.WithAPIKey(key),
		googleai.WithDefaultModel(spec.Model),
		googleai.WithHTTPClient(hc),
	}
	if cfg.BaseURL != "" {
		base, err := googleBaseURL(cfg.BaseURL)
		if err != nil {
			return nil, nil, fmt.Errorf("base URL: %w", err)
		}
		gopts = append(gopts, func(o *googleai.Options) {
			o.ClientOptions = append(o.ClientOptions, option.WithEndpoint(base))
		})
	}
	m, err := googleai.New(ctx, gopts...)
	if err != nil {
		return nil, nil, fmt.Errorf("build client: %w", err)
	}
	return m, http.Header{"X-Goog-Api-Key": {key}}, nil
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}

func keyOrPlaceholder(key, base, env string) (string, error) {
	switch {
	case key != "":
		return key, nil
	case base != "":
		return PlaceholderAPIKey, nil
	default:
		return "", fmt.Errorf("no API key: set %s (or pass one in llm.Config.APIKey)", env)
	}
}

// parseBaseURL parses an http(s) URL, adding http:// when the scheme is
// missing, and returns it without a trailing slash.
func parseBaseURL(raw string) (*url.URL, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil, errors.New("empty URL")
	}
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("parse %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%q: scheme must be http or https", raw)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%q: no host", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%q: base URL must not have a query or fragment", raw)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// versionSegment matches a path with an API version segment (/v1,
// /v1beta/openai, /api/v2).
var versionSegment = regexp.MustCompile(`/v[0-9]+[a-z0-9]*(/|$)`)

// versionedBaseURL normalises an OpenAI or Anthropic base URL: a pasted
// endpoint suffix is removed and /v1 is appended unless the path already
// has a version segment.
func versionedBaseURL(raw, endpoint string) (string, error) {
	u, err := parseBaseURL(raw)
	if err != nil {
		return "", err
	}
	u.Path = strings.TrimRight(strings.TrimSuffix(u.Path, endpoint), "/")
	if !versionSegment.MatchString(u.Path) {
		u.Path += "/v1"
	}
	return u.String(), nil
}

// ollamaURL normalises an Ollama server URL or OLLAMA_HOST value
// ("host", "host:port", ":port", "http://host:port"); a missing port means
// Ollama's 11434 unless a scheme was given.
func ollamaURL(raw string) (string, error) {
	if raw == "" {
		return DefaultOllamaURL, nil
	}
	hadScheme := strings.Contains(raw, "://")
	if strings.HasPrefix(raw, ":") {
		raw = "127.0.0.1" + raw
	}
	u, err := parseBaseURL(raw)
	if err != nil {
		return "", err
	}
	if !hadScheme && u.Port() == "" {
		u.Host = net.JoinHostPort(u.Hostname(), "11434")
	}
	for _, s := range []string{"/api/chat", "/api", "/v1"} {
		u.Path = strings.TrimSuffix(u.Path, s)
	}
	return u.String(), nil
}

// googleBaseURL normalises a Google AI endpoint to the server root: the
// client appends /v1beta/models/MODEL:generateContent itself.
func googleBaseURL(raw string) (string, error) {
	u, err := parseBaseURL(raw)
	if err != nil {
		return "", err
	}
	for _, s := range []string{"/v1beta", "/v1"} {
		u.Path = strings.TrimSuffix(u.Path, s)
	}
	return u.String(), nil
}

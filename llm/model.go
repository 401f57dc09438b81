package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/tmc/langchaingo/llms"
)

// Errors that Generate wraps, for errors.Is.
var (
	// ErrTruncated reports that the model stopped because it hit its output
	// token limit, so the text is cut off.
	ErrTruncated = errors.New("llm output truncated at the token limit")
	// ErrRateLimited reports that the provider refused the call with HTTP
	// 429 (or an equivalent rate-limit error). Its RateLimited method
	// tells packages that do not import this one (skill.GuardedProver)
	// that an error is a rate limit, with or without a stated wait.
	ErrRateLimited error = &rateLimited{"llm provider rate limit"}
	// ErrEmptyOutput reports a reply without any text.
	ErrEmptyOutput = errors.New("llm returned no text")
	// ErrProviderStatus reports a provider HTTP error status that the
	// client library did not turn into an error itself.
	ErrProviderStatus = errors.New("llm provider returned an HTTP error status")
	// ErrResponseTooLarge reports a provider response body longer than
	// MaxResponseBytes; the call was abandoned there.
	ErrResponseTooLarge = errors.New("llm provider response too large")
)

// Defaults of Model.
const (
	// DefaultTimeout bounds one provider call when no timeout is configured.
	DefaultTimeout = 2 * time.Minute
	// DefaultMaxTokens is the output-token cap of a call that sets none.
	// langchaingo's Anthropic default of 2048 is too small for generating
	// a three-part narrative set; 4096 is the largest cap every current
	// model of the four providers accepts (older Claude and GPT-3.5 models
	// reject more). Raise it with Config.MaxTokens where the model allows.
	DefaultMaxTokens = 4096
	// MaxBackoff caps the wait between two rate-limited attempts.
	MaxBackoff = 30 * time.Second
)

// Usage counts tokens, normalised across providers.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens}
}

// Response is one checked model reply.
type Response struct {
	Text string
	// StopReason is the provider's stop reason as reported ("stop",
	// "end_turn", "FinishReasonStop", ...), or the Ollama done_reason.
	StopReason string
	Usage      Usage
	// UsageEstimated reports that the provider sent no token counts, so
	// Usage is estimated from the text: 4 bytes a token, rounded up.
	UsageEstimated bool
}

// RetryPolicy retries calls refused with ErrRateLimited. Attempts is the
// total number of attempts (0 or 1: no retry); the wait before retry i
// (0-based) is Backoff doubled i times, capped at MaxBackoff, or the
// provider's Retry-After when longer (RetryWait); a provider that asks
// for more than MaxBackoff is not retried. Waiting
// honours the caller's context and gives up at once when the context
// deadline comes before the next attempt could start.
type RetryPolicy struct {
	Attempts int
	Backoff  time.Duration
}

// Option configures a Model built by Wrap.
type Option func(*Model)

// WithTimeout sets the per-call deadline (DefaultTimeout when d <= 0).
func WithTimeout(d time.Duration) Option {
	return func(m *Model) {
		if d > 0 {
			m.timeout = d
		}
	}
}

// WithRetry sets the rate-limit retry policy.
func WithRetry(p RetryPolicy) Option { return func(m *Model) { m.retry = p } }

// WithMaxTokens sets the output-token cap of calls that set none
// (DefaultMaxTokens when n <= 0).
func WithMaxTokens(n int) Option {
	return func(m *Model) {
		if n > 0 {
			m.maxTokens = n
		}
	}
}

// WithCallOptions adds call options applied before the per-call ones on
// every call (for example openai.WithLegacyMaxTokensField()).
func WithCallOptions(opts ...llms.CallOption) Option {
	return func(m *Model) { m.defaults = append(m.defaults, opts...) }
}

// WithLogger sets the logger (slog.Default() when nil).
func WithLogger(l *slog.Logger) Option {
	return func(m *Model) {
		if l != nil {
			m.log = l
		}
	}
}

// WithCloser registers a function Close calls, for resources behind the
// wrapped model.
func WithCloser(f func() error) Option {
	return func(m *Model) { m.closers = append(m.closers, f) }
}

// Model wraps an llms.Model with what acaptcha needs from every call: a
// deadline, strict checks of the output (no cut-off, truncated or empty
// text gets through), token usage normalised across providers, typed
// rate-limit errors with an optional bounded retry, and cumulative usage
// counters. It is safe for concurrent use when the wrapped model is.
type Model struct {
	llm       llms.Model
	provider  string
	name      string
	timeout   time.Duration
	maxTokens int
	retry     RetryPolicy
	defaults  []llms.CallOption
	log       *slog.Logger
	closers   []func() error
	// secrets are strings (the API key) that never appear in an error.
	secrets []string
	// noClose: a fork, whose client belongs to the model it came from.
	noClose bool

	warnedNoUsage atomic.Bool

	inTokens  atomic.Int64
	outTokens atomic.Int64
	calls     atomic.Int64
}

// Wrap wraps any llms.Model. provider names it in errors and logs and
// selects provider-specific interpretation of stop reasons ("ollama",
// "openai", ...; any other name is accepted).
func Wrap(m llms.Model, provider string, opts ...Option) *Model {
	w := &Model{
		llm:       m,
		provider:  provider,
		timeout:   DefaultTimeout,
		maxTokens: DefaultMaxTokens,
		log:       slog.Default(),
	}
	for _, o := range opts {
		o(w)
	}
	if w.provider == "" {
		w.provider = "llm"
	}
	return w
}

// Fork returns a Model over the same client with m's settings (name,
// timeout, token cap, retry policy, call defaults, logger, the secrets
// its errors mask) changed by opts, and counters of its own: a caller
// that must count its own calls exactly, while others use m, forks it.
// Closing m closes what the fork uses; Close of the fork does nothing.
func (m *Model) Fork(opts ...Option) *Model {
	f := &Model{
		llm:       m.llm,
		provider:  m.provider,
		name:      m.name,
		timeout:   m.timeout,
		maxTokens: m.maxTokens,
		retry:     m.retry,
		defaults:  append([]llms.CallOption(nil), m.defaults...),
		log:       m.log,
		secrets:   m.secrets,
		noClose:   true,
	}
	for _, o := range opts {
		o(f)
	}
	return f
}

// LLM returns the wrapped langchaingo model.
func (m *Model) LLM() llms.Model { return m.llm }

// Provider returns the provider name.
func (m *Model) Provider() string { return m.provider }

// Name returns "provider:model" for models built by New, else the
// provider name.
func (m *Model) Name() string {
	if m.name != "" {
		return m.name
	}
	return m.provider
}

// Usage returns the tokens counted over every call so far.
func (m *Model) Usage() Usage {
	return Usage{InputTokens: int(m.inTokens.Load()), OutputTokens: int(m.outTokens.Load())}
}

// Calls returns the number of provider calls made (attempts included).
func (m *Model) Calls() int { return int(m.calls.Load()) }

// Close releases what the model holds (idle connections of its own
// transport, the Google AI client). The model must not be used after.
func (m *Model) Close() error {
	if m.noClose {
		return nil
	}
	var errs []error
	for _, f := range m.closers {
		if err := f(); err != nil {
			errs = append(errs, err)
		}
	}
	if c, ok := m.llm.(io.Closer); ok {
		if err := c.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close %s: %w", m.Name(), err)
	}
	return nil
}

// Generate calls the model with msgs and checks the reply. It returns an
// error wrapping context.DeadlineExceeded (or context.Canceled) whenever the
// call's context ended before the reply was complete, even when the client
// library reported success (with a Response carrying the estimated usage
// of the prompt the provider had, for token budgets); ErrTruncated (with the partial Response) when
// the model hit its token limit; ErrEmptyOutput for a reply without text;
// ErrRateLimited when the provider refused the call and the retry policy
// is exhausted.
func (m *Model) Generate(ctx context.Context, msgs []llms.MessageContent, opts ...llms.CallOption) (Response, error) {
	if len(msgs) == 0 {
		return Response{}, fmt.Errorf("%s: no messages to send", m.Name())
	}
	attempts := max(m.retry.Attempts, 1)
	for i := 0; ; i++ {
		resp, err := m.once(ctx, msgs, opts)
		if err == nil || !errors.Is(err, ErrRateLimited) || i+1 >= attempts {
			return resp, err
		}
		wait, ok := RetryWait(err, m.retry.Backoff, i)
		if !ok {
			return resp, fmt.Errorf("%w (the provider asks to wait %s, more than %s)", err, wait, MaxBackoff)
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return resp, fmt.Errorf("%w (no time left to retry before the deadline)", err)
		}
		m.log.Warn("llm rate limited, retrying", "model", m.Name(), "attempt", i+1, "of", attempts, "wait", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return resp, fmt.Errorf("%w (gave up waiting to retry: %w)", err, ctx.Err())
		case <-t.C:
		}
	}
}

// ErrClientPanic reports that the client library panicked on a
// provider's reply (langchaingo's OpenAI client does on
// {"choices":[null]}); Generate turns the panic into this error.
var ErrClientPanic = errors.New("llm client library panicked on the provider's reply")

// generateContent calls the client, turning a panic into an error: a
// reply the client cannot handle must not bring the node down.
func (m *Model) generateContent(ctx context.Context, msgs []llms.MessageContent, opts []llms.CallOption) (cr *llms.ContentResponse, err error) {
	defer func() {
		if r := recover(); r != nil {
			cr, err = nil, fmt.Errorf("%w: %v", ErrClientPanic, r)
		}
	}()
	return m.llm.GenerateContent(ctx, msgs, opts...)
}

// rateLimited is the type of ErrRateLimited.
type rateLimited struct{ msg string }

func (e *rateLimited) Error() string { return e.msg }

// RateLimited marks a provider's rate limit (skill.GuardedProver holds
// hellos off after one).
func (*rateLimited) RateLimited() bool { return true }

// rateLimitError is ErrRateLimited with the wait the provider asked for.
type rateLimitError struct{ after time.Duration }

func (e *rateLimitError) Error() string {
	return fmt.Sprintf("%v (retry after %s)", ErrRateLimited, e.after)
}

func (e *rateLimitError) Unwrap() error { return ErrRateLimited }

// RetryAfter is the wait the provider asked for (the challenge pool's
// pool.ProviderWait).
func (e *rateLimitError) RetryAfter() time.Duration { return e.after }

// RetryAfter returns how long the provider asked to wait before the next
// call (its Retry-After), when err is a rate limit that said so; else 0.
func RetryAfter(err error) time.Duration {
	var e *rateLimitError
	if errors.As(err, &e) {
		return e.after
	}
	return 0
}

// RetryWait is the wait before retry i (0-based) of a call that failed
// with err: Backoff(base, i), or the provider's Retry-After when longer.
// ok is false when the provider asked for more than MaxBackoff: a retry
// sooner would only be refused again.
func RetryWait(err error, base time.Duration, i int) (wait time.Duration, ok bool) {
	wait = max(Backoff(base, i), RetryAfter(err))
	return wait, wait <= MaxBackoff
}

// Backoff is the project's one retry back-off: base doubled i times,
// capped at MaxBackoff (0 for a non-positive base). The LLM clients and
// the generators retry with it.
func Backoff(base time.Duration, i int) time.Duration {
	if base <= 0 {
		return 0
	}
	d := base
	for ; i > 0 && d < MaxBackoff; i-- {
		d *= 2
	}
	return min(d, MaxBackoff)
}

// once makes one attempt.
func (m *Model) once(ctx context.Context, msgs []llms.MessageContent, opts []llms.CallOption) (Response, error) {
	cctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	obs := &observation{}
	cctx = context.WithValue(cctx, observationKey{}, obs)

	callOpts := make([]llms.CallOption, 0, len(m.defaults)+len(opts)+1)
	callOpts = append(callOpts, llms.WithMaxTokens(m.maxTokens))
	callOpts = append(callOpts, m.defaults...)
	callOpts = append(callOpts, opts...)
	var co llms.CallOptions
	for _, o := range callOpts {
		o(&co)
	}

	m.calls.Add(1)
	start := time.Now()
	cr, err := m.generateContent(cctx, msgs, callOpts)
	elapsed := time.Since(start)
	status, doneReason, sniffedUsage := obs.get()
	rateLimited := err != nil && (isRateLimitStatus(status) || isRateLimitError(err))
	if err != nil {
		err = m.clientError(err)
	}
	if obs.isTooLarge() {
		if err != nil {
			return Response{}, fmt.Errorf("%s: %w: read %d bytes, HTTP %d (client: %v)", m.Name(), ErrResponseTooLarge, MaxResponseBytes, status, err)
		}
		return Response{}, fmt.Errorf("%s: %w: read %d bytes, HTTP %d", m.Name(), ErrResponseTooLarge, MaxResponseBytes, status)
	}

	// The context check comes before anything is read from the reply
	// (only an oversized body, itself the cause, is reported first): a
	// client may return success with a reply cut off when the context
	// ended mid-stream, or an error that does not wrap the context error.
	if cerr := cctx.Err(); cerr != nil {
		// The provider had the request: it bills the prompt it read and
		// what it generated, which a token budget must see.
		var cut Response
		if obs.wasSent() {
			partial := 0
			if cr != nil && len(cr.Choices) > 0 && cr.Choices[0] != nil {
				partial = len(cr.Choices[0].Content)
			}
			cut = Response{Usage: Usage{InputTokens: estimateTokens(messagesBytes(msgs)), OutputTokens: estimateTokens(partial)}, UsageEstimated: true}
			m.inTokens.Add(int64(cut.Usage.InputTokens))
			m.outTokens.Add(int64(cut.Usage.OutputTokens))
		}
		if err != nil {
			return cut, fmt.Errorf("%s: call ended after %s: %w (client: %v)", m.Name(), elapsed.Round(time.Millisecond), cerr, err)
		}
		return cut, fmt.Errorf("%s: call ended after %s: %w", m.Name(), elapsed.Round(time.Millisecond), cerr)
	}
	if err != nil {
		if rateLimited {
			return Response{}, fmt.Errorf("%s: %w: %w", m.Name(), m.rateLimit(obs), err)
		}
		return Response{}, fmt.Errorf("%s: %w", m.Name(), err)
	}
	if isRateLimitStatus(status) {
		return Response{}, fmt.Errorf("%s: %w (HTTP %d)", m.Name(), m.rateLimit(obs), status)
	}
	if status >= 400 {
		return Response{}, fmt.Errorf("%s: %w: HTTP %d", m.Name(), ErrProviderStatus, status)
	}
	if cr == nil || len(cr.Choices) == 0 {
		return Response{}, fmt.Errorf("%s: %w: no choices", m.Name(), ErrEmptyOutput)
	}

	resp := m.response(cr, doneReason)
	if sniffedUsage != nil {
		resp.Usage = *sniffedUsage
	}
	if resp.Usage == (Usage{}) {
		// No counts at all: a provider that omits usage must not look
		// free to the token budgets.
		resp.Usage = Usage{InputTokens: estimateTokens(messagesBytes(msgs)), OutputTokens: estimateTokens(len(resp.Text))}
		resp.UsageEstimated = true
		if !m.warnedNoUsage.Swap(true) {
			m.log.Warn("llm provider reports no token usage; counting 4 bytes a token", "model", m.Name())
		}
	}
	m.inTokens.Add(int64(resp.Usage.InputTokens))
	m.outTokens.Add(int64(resp.Usage.OutputTokens))
	m.log.Debug("llm call", "model", m.Name(), "elapsed", elapsed, "stop", resp.StopReason,
		"in", resp.Usage.InputTokens, "out", resp.Usage.OutputTokens)

	if truncated(resp.StopReason) || (resp.StopReason == "" && m.provider == string(Ollama) &&
		co.MaxTokens > 0 && resp.Usage.OutputTokens >= co.MaxTokens) {
		return resp, fmt.Errorf("%s: %w (stop reason %q, %d output tokens, limit %d)",
			m.Name(), ErrTruncated, resp.StopReason, resp.Usage.OutputTokens, co.MaxTokens)
	}
	if strings.TrimSpace(resp.Text) == "" {
		return resp, fmt.Errorf("%s: %w (stop reason %q)", m.Name(), ErrEmptyOutput, resp.StopReason)
	}
	return resp, nil
}

// rateLimit is ErrRateLimited, with the provider's Retry-After when it
// sent one.
func (m *Model) rateLimit(obs *observation) error {
	if d := obs.getRetryAfter(); d > 0 {
		return &rateLimitError{after: d}
	}
	return ErrRateLimited
}

// maxClientErrorBytes caps the text of a client library's error in the
// errors Generate returns: the clients copy the provider's error message
// into it whole.
const maxClientErrorBytes = 1024

// clientError is a client library's error with its text capped and the
// model's secrets masked; errors.Is and errors.As see the original.
type clientError struct {
	msg string
	err error
}

func (e *clientError) Error() string { return e.msg }
func (e *clientError) Unwrap() error { return e.err }

// clientError masks the model's secrets in err's text (a provider or a
// proxy may echo the key it was sent) and caps the text.
func (m *Model) clientError(err error) error {
	msg := err.Error()
	for _, s := range m.secrets {
		msg = strings.ReplaceAll(msg, s, "[redacted]")
	}
	if len(msg) > maxClientErrorBytes {
		cut := maxClientErrorBytes
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = fmt.Sprintf("%s... (%d bytes more)", msg[:cut], len(msg)-cut)
	}
	return &clientError{msg: msg, err: err}
}

// bytesPerToken is the estimate of estimateTokens: English prose runs at
// about four bytes a token in the providers' tokenizers.
const bytesPerToken = 4

// estimateTokens estimates the tokens of n bytes of text, rounding up.
func estimateTokens(n int) int { return (n + bytesPerToken - 1) / bytesPerToken }

// messagesBytes is the length of the text parts of msgs.
func messagesBytes(msgs []llms.MessageContent) int {
	n := 0
	for _, mc := range msgs {
		for _, p := range mc.Parts {
			if t, ok := p.(llms.TextContent); ok {
				n += len(t.Text)
			}
		}
	}
	return n
}

// response extracts text, stop reason and usage from a reply. Anthropic
// returns one choice per content block (thinking, text), so its text
// blocks are joined; other providers answer in the first choice.
func (m *Model) response(cr *llms.ContentResponse, doneReason string) Response {
	var r Response
	first := cr.Choices[0]
	if m.provider == string(Anthropic) {
		var b strings.Builder
		for _, c := range cr.Choices {
			if c == nil {
				continue
			}
			b.WriteString(c.Content)
			if r.StopReason == "" {
				r.StopReason = c.StopReason
			}
		}
		r.Text = b.String()
	} else if first != nil {
		r.Text = first.Content
		r.StopReason = first.StopReason
	}
	for _, c := range cr.Choices {
		if c != nil && len(c.GenerationInfo) > 0 {
			r.Usage = NormalizeUsage(c.GenerationInfo)
			break
		}
	}
	if r.StopReason == "" {
		r.StopReason = doneReason
	}
	return r
}

// truncated reports whether a provider stop reason means the output hit
// the token limit: "length" (OpenAI, Ollama done_reason), "max_tokens"
// (Anthropic), "FinishReasonMaxTokens" (langchaingo's Google AI) or
// "MAX_TOKENS" (Google AI wire form).
func truncated(stop string) bool {
	switch normStop(stop) {
	case "length", "maxtokens", "finishreasonmaxtokens", "maxoutputtokens":
		return true
	}
	return false
}

func normStop(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	return strings.NewReplacer("_", "", "-", "", " ", "").Replace(s)
}

// rateLimitText matches how the clients spell a 429 in their errors:
// "API returned unexpected status code: 429" (openai, anthropic),
// "googleapi: Error 429" (googleai), "429 Too Many Requests" (ollama's
// StatusError), Anthropic's 529 (overloaded_error), and the usual words.
var rateLimitText = regexp.MustCompile(`(?i)(status(?: code)?:? (?:429|529)\b|error 429\b|\b429 too many requests|too many requests|rate[ _-]?limit|resource[ _]exhausted|overloaded[ _]error)`)

// statusOverloaded is Anthropic's 529 overloaded_error: the API is
// busy for everyone, a transient refusal to retry after a back-off like
// a 429, not a failure of this node's model.
const statusOverloaded = 529

func isRateLimitStatus(status int) bool {
	return status == http.StatusTooManyRequests || status == statusOverloaded
}

func isRateLimitError(err error) bool {
	if llms.IsRateLimitError(err) {
		return true
	}
	return rateLimitText.MatchString(err.Error())
}

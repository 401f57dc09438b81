package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// observation is what the transport saw of the HTTP exchanges of one
// Generate attempt. Generate passes it down in the request context.
type observation struct {
	mu         sync.Mutex
	status     int           // last HTTP status
	doneReason string        // Ollama: done_reason of the final NDJSON line
	usage      *Usage        // Google AI: usage of the last reply chunk
	tooLarge   bool          // a response body passed MaxResponseBytes
	retryAfter time.Duration // Retry-After of the last 429 or 503
	sent       bool          // a request went to the provider
}

type observationKey struct{}

func (o *observation) get() (status int, doneReason string, usage *Usage) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.status, o.doneReason, o.usage
}

func (o *observation) setTooLarge() {
	o.mu.Lock()
	o.tooLarge = true
	o.mu.Unlock()
}

func (o *observation) isTooLarge() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.tooLarge
}

func (o *observation) setSent() {
	o.mu.Lock()
	o.sent = true
	o.mu.Unlock()
}

func (o *observation) wasSent() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.sent
}

func (o *observation) setRetryAfter(d time.Duration) {
	o.mu.Lock()
	o.retryAfter = d
	o.mu.Unlock()
}

func (o *observation) getRetryAfter() time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.retryAfter
}

func (o *observation) setStatus(s int) {
	o.mu.Lock()
	o.status = s
	o.mu.Unlock()
}

func (o *observation) setDoneReason(r string) {
	o.mu.Lock()
	o.doneReason = r
	o.mu.Unlock()
}

func (o *observation) setUsage(u Usage) {
	o.mu.Lock()
	o.usage = &u
	o.mu.Unlock()
}

// sniffMode selects what the transport reads from response bodies.
type sniffMode int

const (
	sniffNone sniffMode = iota
	// sniffOllamaDone reads done_reason from Ollama's NDJSON: langchaingo
	// v0.1.14 discards it (its ChatResponse has no such field), so a reply
	// cut off by num_predict would otherwise look complete.
	sniffOllamaDone
	// sniffGoogleUsage reads usageMetadata from Google AI replies: the
	// Google client merges streamed chunks keeping the first chunk's
	// usage, so langchaingo reports the output tokens of the first chunk
	// only (and every multi-message call is streamed).
	sniffGoogleUsage
)

// observingTransport records the HTTP status of every response and what
// its sniff mode reads from response bodies, into the observation found
// in the request context. The body reaches the client unchanged up to
// MaxResponseBytes, and stops at once when the request's context ends.
type observingTransport struct {
	base  http.RoundTripper
	sniff sniffMode
}

func (t *observingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	obs, _ := req.Context().Value(observationKey{}).(*observation)
	if obs != nil {
		obs.setSent()
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if resp.Body != nil {
		resp.Body = &boundedBody{rc: resp.Body, ctx: req.Context(), left: MaxResponseBytes, obs: obs}
	}
	if obs == nil {
		return resp, nil
	}
	obs.setStatus(resp.StatusCode)
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		obs.setRetryAfter(parseRetryAfter(resp.Header, time.Now()))
	}
	if t.sniff != sniffNone && resp.StatusCode < 400 && resp.Body != nil {
		resp.Body = &sniffer{rc: resp.Body, obs: obs, mode: t.sniff}
	}
	return resp, nil
}

// maxRetryAfter bounds the Retry-After a provider can ask for, so that
// sums of waits cannot overflow.
const maxRetryAfter = 24 * time.Hour

// parseRetryAfter reads the wait a response asks for: retry-after-ms
// (Azure OpenAI) or Retry-After in seconds or as an HTTP date; 0 when
// absent or unreadable.
func parseRetryAfter(h http.Header, now time.Time) time.Duration {
	var d time.Duration
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms < float64(maxRetryAfter/time.Millisecond) {
			d = time.Duration(ms * float64(time.Millisecond))
		}
	}
	if v := strings.TrimSpace(h.Get("Retry-After")); d == 0 && v != "" {
		if secs, err := strconv.ParseFloat(v, 64); err == nil {
			if secs > 0 {
				d = time.Duration(min(secs, maxRetryAfter.Seconds()) * float64(time.Second))
			}
		} else if t, err := http.ParseTime(v); err == nil {
			d = max(t.Sub(now), 0)
		}
	}
	return min(d, maxRetryAfter)
}

// MaxResponseBytes bounds the body of one provider response that a Model
// built by New reads, error replies and streams included: a reply of
// DefaultMaxTokens is tens of kilobytes, and the client libraries read
// bodies whole, so a provider (or a proxy) that sends without end would
// otherwise fill memory until the call's deadline (about 130 MB a second
// over loopback).
const MaxResponseBytes = 16 << 20

// boundedBody fails a body past its byte budget (marking the observation,
// so that Generate reports ErrResponseTooLarge whatever the client makes
// of the cut) and once the request's context has ended: a client that
// reads an error body whole does not look at the context itself.
type boundedBody struct {
	rc   io.ReadCloser
	ctx  context.Context
	left int64
	obs  *observation
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	if b.left <= 0 {
		if b.obs != nil {
			b.obs.setTooLarge()
		}
		return 0, fmt.Errorf("%w: more than %d bytes", ErrResponseTooLarge, MaxResponseBytes)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *boundedBody) Close() error { return b.rc.Close() }

// maxSniffBytes bounds what a sniffer buffers: one NDJSON line, or a
// whole Google AI reply.
const maxSniffBytes = 1 << 20

// sniffer passes a body through while keeping a bounded copy to parse.
type sniffer struct {
	rc       io.ReadCloser
	obs      *observation
	mode     sniffMode
	buf      []byte
	overflow bool
	parsed   bool
}

func (s *sniffer) Read(p []byte) (int, error) {
	n, err := s.rc.Read(p)
	if n > 0 {
		if s.mode == sniffOllamaDone {
			s.feedLines(p[:n])
		} else {
			s.keep(p[:n])
		}
	}
	if err == io.EOF {
		s.finish()
	}
	return n, err
}

// Close parses what was read: the Google client may stop reading at the
// closing bracket of its JSON array without seeing EOF.
func (s *sniffer) Close() error {
	s.finish()
	return s.rc.Close()
}

func (s *sniffer) keep(b []byte) {
	if s.overflow {
		return
	}
	if len(s.buf)+len(b) > maxSniffBytes {
		s.overflow, s.buf = true, nil
		return
	}
	s.buf = append(s.buf, b...)
}

func (s *sniffer) finish() {
	if s.parsed {
		return
	}
	s.parsed = true
	if s.overflow || len(s.buf) == 0 {
		return
	}
	switch s.mode {
	case sniffOllamaDone:
		s.ollamaLine(s.buf)
	case sniffGoogleUsage:
		s.googleUsage(s.buf)
	}
	s.buf = nil
}

func (s *sniffer) feedLines(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			s.keep(b)
			return
		}
		if !s.overflow && len(s.buf)+i <= maxSniffBytes {
			s.ollamaLine(append(s.buf, b[:i]...))
		}
		s.buf, s.overflow = s.buf[:0], false
		b = b[i+1:]
	}
}

func (s *sniffer) ollamaLine(l []byte) {
	l = bytes.TrimSpace(l)
	if len(l) == 0 || l[0] != '{' {
		return
	}
	var v struct {
		Done       bool   `json:"done"`
		DoneReason string `json:"done_reason"`
	}
	if json.Unmarshal(l, &v) == nil && v.Done {
		s.obs.setDoneReason(v.DoneReason)
	}
}

type googleChunk struct {
	UsageMetadata *struct {
		PromptTokenCount     int `json:"promptTokenCount"`
		CandidatesTokenCount int `json:"candidatesTokenCount"`
		// ThoughtsTokenCount is the thinking of Gemini 2.5 models,
		// billed as output but not counted in the candidates.
		ThoughtsTokenCount int `json:"thoughtsTokenCount"`
	} `json:"usageMetadata"`
}

// googleUsage reads the usage of the last chunk of a complete Google AI
// reply (output: the candidates' tokens plus the thinking tokens): one JSON object (generateContent) or an array of them
// (streamGenerateContent). An incomplete body is ignored.
func (s *sniffer) googleUsage(b []byte) {
	b = bytes.TrimSpace(b)
	var chunks []googleChunk
	switch {
	case len(b) > 0 && b[0] == '[':
		if json.Unmarshal(b, &chunks) != nil {
			return
		}
	case len(b) > 0 && b[0] == '{':
		var c googleChunk
		if json.Unmarshal(b, &c) != nil {
			return
		}
		chunks = []googleChunk{c}
	}
	for i := len(chunks) - 1; i >= 0; i-- {
		if u := chunks[i].UsageMetadata; u != nil {
			out := max(u.CandidatesTokenCount, 0) + min(max(u.ThoughtsTokenCount, 0), math.MaxInt32)
			s.obs.setUsage(Usage{InputTokens: max(u.PromptTokenCount, 0), OutputTokens: out})
			return
		}
	}
}

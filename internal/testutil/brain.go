// Package testutil holds test helpers shared by acaptcha's packages: test
// brains (an oracle, a keyword-matching script, scripted and slow
// replies) and loopback stub servers that speak the wire APIs of the LLM
// providers the llm package supports, so tests drive the real langchaingo
// clients without a real LLM.
//
// Production code must not import this package.
package testutil

import (
	"strings"
	"sync"
	"time"
)

// Message is one message of a conversation as a stub server received it.
type Message struct {
	Role    string // "user", "assistant" or "system"
	Content string
}

// BrainRequest is a provider request, reduced to what a brain needs.
type BrainRequest struct {
	// Provider is the stub's provider: "openai", "anthropic", "ollama" or
	// "googleai".
	Provider string
	Model    string
	// System is the system prompt (system messages joined by blank lines).
	System string
	// Messages is the conversation without the system prompt, oldest
	// first.
	Messages []Message
	// MaxTokens is the output-token cap the client asked for (0: none).
	MaxTokens int
	// Stream reports that the server answers in chunks (SSE or NDJSON).
	Stream bool
}

// LastUser returns the content of the last user message.
func (r BrainRequest) LastUser() (string, bool) {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Content, true
		}
	}
	return "", false
}

// EarlierUsers returns the contents of the user messages before the last
// one.
func (r BrainRequest) EarlierUsers() []string {
	last := -1
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			last = i
			break
		}
	}
	var out []string
	for i := 0; i < last; i++ {
		if r.Messages[i].Role == "user" {
			out = append(out, r.Messages[i].Content)
		}
	}
	return out
}

// InputTokens is the prompt size the stubs report: Tokens of the system
// prompt plus Tokens of every message.
func (r BrainRequest) InputTokens() int {
	n := Tokens(r.System)
	for _, m := range r.Messages {
		n += Tokens(m.Content)
	}
	return n
}

// Tokens is the stubs' tokenizer: the number of white-space separated
// words.
func Tokens(s string) int { return len(strings.Fields(s)) }

// Finish reasons of BrainReply.
const (
	FinishStop   = ""       // the reply is complete
	FinishLength = "length" // the reply was cut at the token limit
)

// BrainReply is what a stub server answers.
type BrainReply struct {
	Text string
	// Delay holds the reply back. In a streamed reply the first word goes
	// out at once and the rest after Delay, so that a client whose context
	// ends mid-stream has received part of the text. The wait ends early
	// when the request is cancelled or the server closes.
	Delay time.Duration
	// FinishReason is FinishStop or FinishLength. The servers also report
	// FinishLength when Text has more Tokens than the request's MaxTokens,
	// cutting Text to MaxTokens words.
	FinishReason string
	// Status, when neither 0 nor 200, makes the server answer with that
	// HTTP error status (429, 500, ...) in the provider's error format.
	Status int
	// RetryAfter, when positive, is sent with an error status as a
	// Retry-After header in whole seconds (rounded up).
	RetryAfter time.Duration
	// ErrorMessage, with an error Status, replaces the error reply's
	// message ("stub error: ...").
	ErrorMessage string
	// NoUsage leaves the token usage out of the reply, as some
	// OpenAI-compatible servers do (openai only).
	NoUsage bool
}

// Brain decides the stub servers' replies. Implementations must be safe
// for concurrent use.
type Brain interface {
	Reply(req BrainRequest) BrainReply
}

// BrainFunc adapts a function to Brain.
type BrainFunc func(req BrainRequest) BrainReply

// Reply implements Brain.
func (f BrainFunc) Reply(req BrainRequest) BrainReply { return f(req) }

// Text returns a brain that always replies text.
func Text(text string) Brain {
	return BrainFunc(func(BrainRequest) BrainReply { return BrainReply{Text: text} })
}

// Slow delays every reply of inner by d more.
func Slow(inner Brain, d time.Duration) Brain {
	return BrainFunc(func(req BrainRequest) BrainReply {
		r := inner.Reply(req)
		r.Delay += d
		return r
	})
}

// Sequence replies with replies in order, then repeats the last one
// (an empty reply when there are none).
func Sequence(replies ...BrainReply) Brain {
	s := &sequence{replies: append([]BrainReply(nil), replies...)}
	return s
}

type sequence struct {
	mu      sync.Mutex
	replies []BrainReply
	next    int
}

func (s *sequence) Reply(BrainRequest) BrainReply {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.replies) == 0 {
		return BrainReply{}
	}
	r := s.replies[min(s.next, len(s.replies)-1)]
	s.next++
	return r
}

// Package llm builds and wraps the language models acaptcha talks to:
// the verifier's challenge generator and the prover's solver.
//
// New builds the real langchaingo client for a "provider:model" spec
// (openai, anthropic, ollama, googleai), reading the providers' usual
// environment variables for what Config leaves empty. Every model, built
// by New or wrapped with Wrap, is used through Model.Generate, which
// enforces a per-call deadline and checks each reply strictly: a call
// whose context ended is an error wrapping the context's error even when
// the client library reported success, a reply cut at the token limit is
// ErrTruncated, an empty reply is ErrEmptyOutput, and a provider's HTTP 429
// (or Anthropic's 529 overloaded_error) is ErrRateLimited (retried under a
// RetryPolicy). Token usage is normalised across providers and counted.
//
// The prover's brain over a Model is solve.Solver (package skill/solve):
// it implements skill.Prover, with or without memory of earlier rounds.
// This package is provider plumbing only and imports nothing of acaptcha.
//
// # Client quirks handled here (langchaingo v0.1.14)
//
//   - openai: the client refuses to start without an API key, even for a
//     local OpenAI-compatible server (New sends PlaceholderAPIKey when a base
//     URL is configured without a key); base URLs must include the /v1
//     segment (New appends it); with a streaming function, a context that
//     ends mid-stream can yield success with the partial text, and its
//     timeout errors do not wrap context.DeadlineExceeded; it always sends
//     "temperature" (0 when unset) to non-reasoning models.
//   - anthropic: the client's default max_tokens is 2048; Model sends its
//     own cap on every call. Base URLs need /v1 as for openai.
//   - ollama: the client drops done_reason and leaves StopReason empty,
//     and returns success with empty or partial text when its context ends
//     mid-stream. Models built by New read done_reason from the NDJSON
//     body in their HTTP transport; a wrapped Ollama model is judged
//     truncated when its output tokens reach the cap. ollama.WithServerURL
//     calls log.Fatal on a URL it cannot parse, so New parses it first.
//   - googleai: a custom endpoint is set with Google's option.WithEndpoint
//     through googleai.Options.ClientOptions; given an HTTP client, the
//     Google client drops its API key, so New's transport sends it in the
//     x-goog-api-key header. Every multi-message call (a system prompt and
//     one user message included) goes to streamGenerateContent, and the
//     Google client keeps the usage of the first streamed chunk only, so
//     New's transport reads usageMetadata from the last chunk. Its stop
//     reasons read "FinishReasonStop", "FinishReasonMaxTokens". Closing the
//     model does not close the gRPC connection the Google client opens for
//     its cache service: build one googleai model per process.
package llm

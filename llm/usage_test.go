package llm

import (
	"math"
	"testing"
	"time"
)

// The maps below copy the GenerationInfo keys and value types that
// langchaingo v0.1.14 fills in for each provider.
func TestNormalizeUsage(t *testing.T) {
	cases := []struct {
		name string
		info map[string]any
		want Usage
	}{
		{"openai", map[string]any{"PromptTokens": 12, "CompletionTokens": 3, "TotalTokens": 15, "ReasoningTokens": 0}, Usage{12, 3}},
		{"anthropic", map[string]any{"InputTokens": 20, "OutputTokens": 4, "CacheReadInputTokens": 0}, Usage{20, 4}},
		{"ollama v0.1.14", map[string]any{"PromptTokens": 30, "CompletionTokens": 5, "TotalTokens": 35}, Usage{30, 5}},
		{"ollama older", map[string]any{"PromptEvalCount": 31, "EvalCount": 6}, Usage{31, 6}},
		{"googleai", map[string]any{"input_tokens": int32(40), "output_tokens": int32(7), "PromptTokens": int32(40), "CompletionTokens": int32(7)}, Usage{40, 7}},
		{"json numbers", map[string]any{"prompt_tokens": float64(8), "completion_tokens": float64(2)}, Usage{8, 2}},
		{"int64", map[string]any{"InputTokens": int64(9), "OutputTokens": int64(1)}, Usage{9, 1}},
		{"missing", map[string]any{"ThinkingContent": ""}, Usage{}},
		{"nil", nil, Usage{}},
		{"garbage", map[string]any{"InputTokens": "12", "OutputTokens": -3, "PromptTokens": math.NaN()}, Usage{}},
		{"fallback past garbage", map[string]any{"InputTokens": "x", "PromptTokens": 5, "OutputTokens": nil, "CompletionTokens": 2}, Usage{5, 2}},
		{"huge", map[string]any{"InputTokens": float64(1e300), "OutputTokens": uint64(math.MaxUint64)}, Usage{}},
	}
	for _, c := range cases {
		if got := NormalizeUsage(c.info); got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestTruncatedStopReasons(t *testing.T) {
	for _, s := range []string{"length", "max_tokens", "MAX_TOKENS", "FinishReasonMaxTokens", "max-output-tokens"} {
		if !truncated(s) {
			t.Errorf("%q not seen as truncated", s)
		}
	}
	for _, s := range []string{"", "stop", "end_turn", "FinishReasonStop", "STOP", "tool_calls", "stop_sequence"} {
		if truncated(s) {
			t.Errorf("%q seen as truncated", s)
		}
	}
}

func TestBackoff(t *testing.T) {
	if d := Backoff(0, 3); d != 0 {
		t.Errorf("zero base: %s", d)
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}
	for i, w := range want {
		if d := Backoff(100*time.Millisecond, i); d != w {
			t.Errorf("Backoff(100ms, %d) = %s, want %s", i, d, w)
		}
	}
	if d := Backoff(time.Second, 40); d != MaxBackoff {
		t.Errorf("capped: %s", d)
	}
}

func TestUsageAdd(t *testing.T) {
	if got := (Usage{1, 2}).Add(Usage{3, 4}); got != (Usage{4, 6}) {
		t.Errorf("got %+v", got)
	}
}

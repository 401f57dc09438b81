package llm

import "math"

// Keys under which langchaingo v0.1.14 reports token counts in
// ContentChoice.GenerationInfo, most specific first:
//
//	openai     PromptTokens, CompletionTokens (int)
//	anthropic  InputTokens, OutputTokens (int)
//	ollama     PromptTokens, CompletionTokens (int; from prompt_eval_count and
//	           eval_count; older releases used PromptEvalCount, EvalCount)
//	googleai   input_tokens, output_tokens (int32), also PromptTokens,
//	           CompletionTokens
var (
	inputTokenKeys  = []string{"InputTokens", "input_tokens", "PromptTokens", "prompt_tokens", "PromptEvalCount", "prompt_eval_count"}
	outputTokenKeys = []string{"OutputTokens", "output_tokens", "CompletionTokens", "completion_tokens", "EvalCount", "eval_count"}
)

// NormalizeUsage reads input and output token counts from a langchaingo
// GenerationInfo map, whatever provider filled it in. Missing, negative or
// non-numeric values count as zero.
func NormalizeUsage(info map[string]any) Usage {
	return Usage{InputTokens: firstCount(info, inputTokenKeys), OutputTokens: firstCount(info, outputTokenKeys)}
}

func firstCount(info map[string]any, keys []string) int {
	for _, k := range keys {
		if v, ok := info[k]; ok {
			if n, ok := toInt(v); ok {
				return n
			}
		}
	}
	return 0
}

func toInt(v any) (int, bool) {
	var n int64
	switch x := v.(type) {
	case int:
		n = int64(x)
	case int32:
		n = int64(x)
	case int64:
		n = x
	case uint32:
		n = int64(x)
	case uint64:
		if x > math.MaxInt32 {
			return 0, false
		}
		n = int64(x)
	case float64:
		if math.IsNaN(x) || x > math.MaxInt32 {
			return 0, false
		}
		n = int64(x)
	case float32:
		if math.IsNaN(float64(x)) || x > math.MaxInt32 {
			return 0, false
		}
		n = int64(x)
	default:
		return 0, false
	}
	if n < 0 || n > math.MaxInt32 {
		return 0, false
	}
	return int(n), true
}

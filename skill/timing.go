package skill

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"time"
	"unicode"
	"unicode/utf8"
)

// HumanModel holds the cognitive constants of the paper's human timing
// model (§5.1 Eq. 6, Table 2): silent reading at about 5 tokens/s (238 wpm),
// a psychological-refractory-period decision of at least 350 ms, and expert
// typing at about 0.9 tokens/s (40 wpm).
type HumanModel struct {
	ReadTokensPerSec float64       // R_read
	Decision         time.Duration // T_PRP
	TypeTokensPerSec float64       // R_type
	AnswerTokens     float64       // A, the answer length in tokens
}

// DefaultHumanModel returns the paper's constants with A = 10 tokens, the
// maximum answer length of its corpus (§6.3).
func DefaultHumanModel() HumanModel {
	return HumanModel{ReadTokensPerSec: 5.0, Decision: 350 * time.Millisecond, TypeTokensPerSec: 0.9, AnswerTokens: 10}
}

// LowerBound is Eq. 6: the fastest a human can read L tokens, decide once
// and type the answer, with no comprehension overhead at all. For L = 682
// it gives about 148 s (Eq. 14).
func (m HumanModel) LowerBound(narrativeTokens int) time.Duration {
	secs := float64(narrativeTokens)/m.ReadTokensPerSec + m.Decision.Seconds() + m.AnswerTokens/m.TypeTokensPerSec
	return time.Duration(secs * float64(time.Second))
}

// CountTokens estimates the LLM token count of text with the paper's rule
// of thumb (1 token ~ 0.75 English words). A real tokenizer depends on the
// model; the estimate is what the timing model was calibrated with.
func CountTokens(text string) int {
	return int(math.Round(float64(countFields(text)) / 0.75))
}

// PromptTokens is what a prover charges its token budgets for text an
// answerer reads (spec/protocol.md §9a): CountTokens, or a token per 3
// bytes when that is more. Words alone undercount text with little white
// space (32 KiB of hyphenated words is one "word" and thousands of
// tokens to an LLM); 3 bytes is under what a tokenizer gives English
// prose (about 4) and over what it gives most other text. TokenBound
// bounds it too.
func PromptTokens(text string) int {
	return max(CountTokens(text), (len(text)+2)/3)
}

// TokenBound is the most CountTokens and PromptTokens can return for a
// text of n bytes (a field takes a byte and is followed by white space or
// the end; ⌈n/3⌉ is below n/1.5 from n = 2 on, and 1 for n = 1), at
// no cost: the prover reserves this much of a verifier's token budget
// before its answerer starts and settles the exact count afterwards.
func TokenBound(n int) int {
	return int(math.Round(float64((max(n, 0)+1)/2) / 0.75))
}

// countFields is len(strings.Fields(s)) without building the slice (it
// runs on every challenge a prover receives, before its answerer may
// start, and on every round judged). Runs of eight ASCII bytes are
// classified at once (SWAR: a byte is white space when it is ' ' or in
// '\t'..'\r', tested in each byte's high bit); other bytes go through the
// table, and only non-ASCII runes are decoded and asked of unicode.IsSpace
// (U+0085, U+00A0 and the Unicode spaces). That keeps it exactly
// strings.Fields' notion of white space (FuzzCountFields) at about a
// fortieth of the cost on English prose.
func countFields(s string) int {
	n := 0
	in := false
	for i := 0; i < len(s); {
		if i+8 <= len(s) {
			w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
				uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
			if w&hi8 == 0 {
				space := asciiSpaceMask(w)
				prev := uint64(0x80) // byte -1 counts as space when not in a field
				if in {
					prev = 0
				}
				starts := ^space & hi8 & (space<<8 | prev)
				n += bits.OnesCount64(starts)
				in = space>>63 == 0
				i += 8
				continue
			}
		}
		c := s[i]
		var space bool
		if c < utf8.RuneSelf {
			space = asciiSpace[c] != 0
			i++
		} else {
			r, size := utf8.DecodeRuneInString(s[i:])
			space = unicode.IsSpace(r)
			i += size
		}
		if space {
			in = false
			continue
		}
		if !in {
			n++
			in = true
		}
	}
	return n
}

const (
	lo8 = 0x0101010101010101
	hi8 = 0x8080808080808080
)

// asciiSpaceMask returns, for eight ASCII bytes (each below 0x80), 0x80 in
// every byte that is ASCII white space and 0 elsewhere. No sum crosses a
// byte: every operand byte is below 0x80.
func asciiSpaceMask(w uint64) uint64 {
	// ' ': the byte XOR 0x20 is zero exactly when the high bit of
	// (x&0x7f)+0x7f is clear (x is below 0x80).
	x := w ^ (0x20 * lo8)
	isBlank := ^((x&(0x7f*lo8) + 0x7f*lo8) | x) & hi8
	// '\t'..'\r' (9..13): b+0x77 has its high bit set iff b >= 9, b+0x72
	// iff b >= 14.
	ge9 := (w + 0x77*lo8) & hi8
	ge14 := (w + 0x72*lo8) & hi8
	return isBlank | (ge9 &^ ge14)
}

// asciiSpace marks the ASCII white space of unicode.IsSpace.
var asciiSpace = [utf8.RuneSelf]uint8{'\t': 1, '\n': 1, '\v': 1, '\f': 1, '\r': 1, ' ': 1}

// Policy is the timing and round policy of one verifier (paper Table 3).
type Policy struct {
	// Rounds is how many chained rounds a session runs (1..3).
	Rounds int
	// Tau, Total and RTTCredit are whole milliseconds (Check): the wire
	// and the attestation state them so, and a session is judged on what
	// it states.
	// Tau is the fixed per-round budget, MinBudget..Total. When DeriveTau
	// is set it is ignored and each round's budget is Alpha times the
	// human lower bound of that round's narrative (Eq. 13); a set with a
	// round whose derived budget falls outside MinBudget..Total is
	// refused (CheckBudget, NewSession).
	Tau       time.Duration
	DeriveTau bool
	// Alpha is the safety margin of Eq. 13 for derived budgets.
	Alpha float64
	// MaxHumanFraction bounds any budget, fixed or derived: tau must not
	// exceed this fraction of the modelled human lower bound of the
	// narrative it guards. It is the check that refuses a policy where
	// tau is not far below what the fastest human needs.
	MaxHumanFraction float64
	// Total bounds the whole session (T_total).
	Total time.Duration
	// RTTCredit caps the round-trip time subtracted from each round's
	// elapsed time, so a prover that slows the RTT probes gains at most
	// this much per round.
	RTTCredit time.Duration
	// Human is the timing model the checks use.
	Human HumanModel
}

// Defaults from the paper's prototype (§6.1) and Eq. 13.
const (
	DefaultRounds           = 3
	DefaultTau              = 15 * time.Second
	DefaultTotal            = 120 * time.Second
	DefaultAlpha            = 0.1
	DefaultMaxHumanFraction = 0.25
	DefaultRTTCredit        = 500 * time.Millisecond
)

// DefaultPolicy returns the paper's operating point: three rounds, tau =
// 15 s, T_total = 120 s.
func DefaultPolicy() Policy {
	return Policy{
		Rounds:           DefaultRounds,
		Tau:              DefaultTau,
		Alpha:            DefaultAlpha,
		MaxHumanFraction: DefaultMaxHumanFraction,
		Total:            DefaultTotal,
		RTTCredit:        DefaultRTTCredit,
		Human:            DefaultHumanModel(),
	}
}

// ErrPolicy is wrapped by every policy validation failure.
var ErrPolicy = errors.New("invalid timing policy")

// MinBudget is the shortest budget a round can have: the wire and the
// records carry budgets as whole milliseconds (truncated), and a prover
// refuses a Challenge whose budget_ms is 0 (spec/protocol.md §3, §6).
const MinBudget = time.Millisecond

// Check validates the policy's own parameters.
func (p Policy) Check() error {
	switch {
	case p.Rounds < 1 || p.Rounds > Parts:
		return fmt.Errorf("%w: rounds %d, want 1..%d", ErrPolicy, p.Rounds, Parts)
	case !p.DeriveTau && p.Tau < MinBudget:
		// The wire carries budget_ms in whole milliseconds: a tau under
		// 1 ms would go out as 0, which every prover refuses.
		return fmt.Errorf("%w: tau %s, want at least %s", ErrPolicy, p.Tau, MinBudget)
	case p.DeriveTau && (p.Alpha <= 0 || p.Alpha >= 1):
		return fmt.Errorf("%w: alpha %.3g, want 0 < alpha < 1", ErrPolicy, p.Alpha)
	case p.MaxHumanFraction <= 0 || p.MaxHumanFraction >= 1:
		return fmt.Errorf("%w: max human fraction %.3g, want 0 < f < 1", ErrPolicy, p.MaxHumanFraction)
	case p.Total < MinBudget:
		return fmt.Errorf("%w: total %s, want at least %s", ErrPolicy, p.Total, MinBudget)
	case p.RTTCredit < 0:
		return fmt.Errorf("%w: negative RTT credit", ErrPolicy)
	case p.Tau%time.Millisecond != 0 || p.Total%time.Millisecond != 0 || p.RTTCredit%time.Millisecond != 0:
		// The wire and the attestation carry them in whole milliseconds
		// (tau_ms, total_ms, rtt_credit_ms): a session judged on finer
		// values than it states could not be judged again from them.
		return fmt.Errorf("%w: tau %s, total %s and RTT credit %s must be whole milliseconds", ErrPolicy, p.Tau, p.Total, p.RTTCredit)
	case p.Human.ReadTokensPerSec <= 0 || p.Human.TypeTokensPerSec <= 0:
		return fmt.Errorf("%w: human model rates must be positive", ErrPolicy)
	}
	if !p.DeriveTau && p.Total < p.Tau {
		return fmt.Errorf("%w: total %s is shorter than one round's tau %s", ErrPolicy, p.Total, p.Tau)
	}
	return nil
}

// Budget returns the budget for a round whose narrative has the given
// token count, or an error when that budget is not far enough below the
// modelled human lower bound (Eq. 13 with MaxHumanFraction as the bound).
// It does not check the budget against Total: CheckBudget does, and
// NewSession applies both.
func (p Policy) Budget(narrativeTokens int) (time.Duration, error) {
	return p.budget(p.Human.LowerBound(narrativeTokens), func() string { return fmt.Sprintf("a %d-token narrative", narrativeTokens) })
}

// BudgetFor is Budget for a round of any kind: the lower bound is the
// kind's human timing model (Kind.LowerBound) for the round showing part
// and asking q. For the narrative kind it equals Budget of the
// narrative's token count.
func (p Policy) BudgetFor(k Kind, part *Part, q *Question) (time.Duration, error) {
	if k.LowerBound == nil {
		return 0, fmt.Errorf("%w: kind %q has no human timing model", ErrPolicy, k.Name)
	}
	return p.budget(k.LowerBound(p, part, q), func() string {
		return fmt.Sprintf("a %s round of %d tokens", k.Name, CountTokens(part.Narrative))
	})
}

// budgetForTokens is BudgetFor for a kind whose LowerBound is the
// narrative model over the narrative's token count (Kind.byTokens),
// given that count.
func (p Policy) budgetForTokens(k Kind, tokens int) (time.Duration, error) {
	return p.budget(p.Human.LowerBound(tokens), func() string {
		return fmt.Sprintf("a %s round of %d tokens", k.Name, tokens)
	})
}

// budget derives or checks tau against the human lower bound lb (Eq. 13
// with MaxHumanFraction as the bound); what names the round for errors.
func (p Policy) budget(lb time.Duration, what func() string) (time.Duration, error) {
	tau := p.Tau
	if p.DeriveTau {
		tau = time.Duration(p.Alpha * float64(lb)).Round(time.Millisecond)
	}
	if limit := time.Duration(p.MaxHumanFraction * float64(lb)); tau > limit {
		return 0, fmt.Errorf("%w: tau %s for %s exceeds %.0f%% of the human lower bound %s; use a longer narrative or a smaller tau",
			ErrPolicy, tau, what(), 100*p.MaxHumanFraction, lb.Round(time.Second))
	}
	return tau, nil
}

// CheckBudget reports, with an error wrapping ErrPolicy, a round budget
// the wire cannot carry under p: one under MinBudget (the Challenge's
// budget_ms, truncated to whole milliseconds, would be 0) or above Total
// (budget_ms above the Hello's total_ms). A prover refuses either as a
// protocol violation (spec/protocol.md §3, §6 step 7), so the honest
// prover would be signed protocol_error; NewSession refuses the set
// instead.
//
// A fixed tau that passed Check is always in range; a derived one need
// not be: a long narrative under a short Total derives a budget above it
// (a 600-token narrative, alpha 0.2: 26.292 s against a 20 s total), and
// a tiny alpha one that rounds to 0 ms.
func (p Policy) CheckBudget(b time.Duration) error {
	switch {
	case b < MinBudget:
		return fmt.Errorf("%w: budget %s is under %s (budget_ms would be 0); use a larger alpha", ErrPolicy, b, MinBudget)
	case b > p.Total:
		return fmt.Errorf("%w: budget %s exceeds the session total %s; use a shorter narrative, a smaller alpha or a longer total", ErrPolicy, b, p.Total)
	}
	return nil
}

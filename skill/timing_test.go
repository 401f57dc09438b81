package skill

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Policy durations are whole milliseconds: the wire and the attestation
// state them so, and a session must be judged on what it states.
func TestPolicyWholeMilliseconds(t *testing.T) {
	for name, f := range map[string]func(*Policy){
		"tau":        func(p *Policy) { p.Tau += 500 * time.Microsecond },
		"total":      func(p *Policy) { p.Total += time.Nanosecond },
		"rtt credit": func(p *Policy) { p.RTTCredit = 1500 * time.Microsecond },
	} {
		p := DefaultPolicy()
		f(&p)
		if err := p.Check(); !errors.Is(err, ErrPolicy) {
			t.Errorf("%s not whole milliseconds: %v", name, err)
		}
	}
	if err := DefaultPolicy().Check(); err != nil {
		t.Fatal(err)
	}
}

// PromptTokens is at least a token per 3 bytes and at least CountTokens,
// and never above TokenBound (what the prover reserves first).
func TestPromptTokens(t *testing.T) {
	for _, s := range []string{"", "a", "ab", "abc", "a b c d", strings.Repeat("hyphen-ated-", 2730), strings.Repeat("x ", 5000), "é é", "The cold room read 4 degrees."} {
		got := PromptTokens(s)
		if got < CountTokens(s) || got < (len(s)+2)/3 || got > TokenBound(len(s)) {
			t.Errorf("PromptTokens(%d bytes) = %d: words %d, bytes/3 %d, bound %d", len(s), got, CountTokens(s), (len(s)+2)/3, TokenBound(len(s)))
		}
	}
	for n := range 5000 {
		s := strings.Repeat("y", n)
		if got := PromptTokens(s); got > TokenBound(n) {
			t.Fatalf("n=%d: %d above the bound %d", n, got, TokenBound(n))
		}
	}
	if got := PromptTokens(strings.Repeat("hyphen-ated-", 2730)); got < 10000 {
		t.Fatalf("32 KiB without white space charged %d tokens", got)
	}
}

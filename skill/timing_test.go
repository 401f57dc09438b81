package skill

import (
	"errors"
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

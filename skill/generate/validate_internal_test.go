package generate

import (
	"fmt"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
)

func TestContexts(t *testing.T) {
	live := [][]int{{0, 2}, {0, 1, 2}, {1}}
	if got := contexts(live, 0, 27); fmt.Sprint(got) != "[[]]" {
		t.Errorf("part 1: %v", got)
	}
	if got := contexts(live, 1, 27); fmt.Sprint(got) != "[[0] [2]]" {
		t.Errorf("part 2: %v", got)
	}
	all := contexts(live, 2, 27)
	if len(all) != 6 {
		t.Fatalf("part 3: %v", all)
	}
	seen := map[string]bool{}
	for _, c := range all {
		seen[fmt.Sprint(c)] = true
	}
	if len(seen) != 6 {
		t.Errorf("repeated contexts: %v", all)
	}
	if got := contexts(live, 2, 3); len(got) != 3 || fmt.Sprint(got[0]) == fmt.Sprint(got[1]) {
		t.Errorf("capped: %v", got)
	}
	if got := contexts([][]int{{}, {0}}, 1, 27); got != nil {
		t.Errorf("empty earlier part: %v", got)
	}
}

func TestTermMatching(t *testing.T) {
	for _, tc := range []struct {
		text, term string
		want       bool
	}{
		{"valve bv-5518 came off", "bv-5518", true},
		{"valve bv-55180 came off", "bv-5518", false},
		{"xbv-5518", "bv-5518", false},
		{"(bv-5518)", "bv-5518", true},
		{"ldh-γ rose", "ldh-γ", true},
		{"ldh-γx", "ldh-γ", false},
		{"delta, bravo", "delta", true},
		{"deltas", "delta", false},
		{"", "x", false},
		{"x", "", false},
	} {
		if got := containsTerm(tc.text, tc.term); got != tc.want {
			t.Errorf("containsTerm(%q, %q) = %v", tc.text, tc.term, got)
		}
	}
	for s, want := range map[string]bool{"3": true, "12": true, "4.5": true, "7%": true, "-2": true, "340": false, "2.87": false, "3 runs": false, "K-22": false, "": false} {
		if trivialNumber(s) != want {
			t.Errorf("trivialNumber(%q) != %v", s, want)
		}
	}
	text := skill.Normalize("First line. The lot flagged earlier, K-22, stays. Another line")
	if sent, ok := (&Validator{}).statesAnswer(text, "k-22"); !ok || sent != "the lot flagged earlier, k-22, stays" {
		t.Errorf("statesAnswer: %q %v", sent, ok)
	}
}

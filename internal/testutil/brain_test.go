package testutil

import (
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSequence(t *testing.T) {
	s := Sequence(BrainReply{Status: 429}, BrainReply{Text: "a"}, BrainReply{Text: "b"})
	var got []string
	for range 5 {
		r := s.Reply(BrainRequest{})
		got = append(got, r.Text+"/"+string(rune('0'+r.Status/100)))
	}
	if strings.Join(got, ",") != "/4,a/0,b/0,b/0,b/0" {
		t.Errorf("got %v", got)
	}
	if r := Sequence().Reply(BrainRequest{}); r != (BrainReply{}) {
		t.Errorf("empty sequence: %+v", r)
	}
}

func TestSequenceConcurrent(t *testing.T) {
	var replies []BrainReply
	for i := range 100 {
		replies = append(replies, BrainReply{Text: strings.Repeat("x", i+1)})
	}
	s := Sequence(replies...)
	seen := make([]bool, 101)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := len(s.Reply(BrainRequest{}).Text)
			mu.Lock()
			seen[n] = true
			mu.Unlock()
		}()
	}
	wg.Wait()
	for i := 1; i <= 100; i++ {
		if !seen[i] {
			t.Fatalf("reply %d never handed out", i)
		}
	}
}

func TestSlow(t *testing.T) {
	r := Slow(Sequence(BrainReply{Text: "a", Delay: time.Second}), 2*time.Second).Reply(BrainRequest{})
	if r.Text != "a" || r.Delay != 3*time.Second {
		t.Errorf("%+v", r)
	}
}

func TestRequestHelpers(t *testing.T) {
	req := BrainRequest{System: "be brief", Messages: []Message{
		{"user", "one"}, {"assistant", "1"}, {"user", "two words"}, {"assistant", "2"}, {"user", "three"},
	}}
	if last, ok := req.LastUser(); !ok || last != "three" {
		t.Errorf("last %q", last)
	}
	if e := req.EarlierUsers(); strings.Join(e, "|") != "one|two words" {
		t.Errorf("earlier %q", e)
	}
	if n := req.InputTokens(); n != 2+1+1+2+1+1 {
		t.Errorf("input tokens %d", n)
	}
	if _, ok := (BrainRequest{}).LastUser(); ok {
		t.Error("empty request has a user message")
	}
}

func TestCutWordsAndPieces(t *testing.T) {
	cases := []struct {
		in   string
		n    int
		want string
	}{
		{"a b c", 2, "a b"},
		{"Paris\nBecause it is", 1, "Paris"},
		{"  lead  two\tthree ", 2, "  lead  two"},
		{"a b", 5, "a b"},
		{"a b", 0, ""},
	}
	for _, c := range cases {
		if got := cutWords(c.in, c.n); got != c.want {
			t.Errorf("cutWords(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
	for _, s := range []string{"", " ", "Paris", "Paris is nice", "  lead\n two  ", "é ü"} {
		ps := pieces(s)
		if strings.Join(ps, "") != s || len(ps) == 0 {
			t.Errorf("pieces(%q) = %q", s, ps)
		}
	}
	if ps := pieces("Meridian arrived late"); ps[0] != "Meridian " || len(ps) != 3 {
		t.Errorf("%q", ps)
	}
}

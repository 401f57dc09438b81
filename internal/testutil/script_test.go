package testutil

import "testing"

func TestKeywordAnswer(t *testing.T) {
	narr := "The harbor of Velmora was quiet in spring. On the night of the storm, the supply ship Meridian arrived two hours late. " +
		"The keeper, Ansel Brask, recorded it in his logbook. The lamp was relit at 9 in the evening."
	cases := []struct{ question, want string }{
		{"Which supply ship arrived late on the night of the storm?", "Meridian"},
		{"Who recorded the arrival in the logbook?", "Ansel"},
		{"When was the lamp relit in the evening?", "9"},
		{"What colour was the sky?", Unknown},
	}
	for _, c := range cases {
		msg := "Round 1 of 3. Domain: ports.\n<<<DATA>>>\n" + narr + "\n<<<END>>>\n\nQuestion: " + c.question + "\n\nReply with the answer only."
		if got := KeywordAnswer(msg); got != c.want {
			t.Errorf("%q: got %q, want %q", c.question, got, c.want)
		}
	}
}

// The script cannot chain facts across narratives it does not see.
func TestKeywordScriptFailsDependentQuestion(t *testing.T) {
	s := oracleSet()
	b := NewKeywordScript()
	msg := "Round 2\n" + s.Parts[1].Narrative + "\nQuestion: " + s.Parts[1].Questions[0].Question
	r := b.Reply(BrainRequest{Messages: []Message{{Role: "user", Content: msg}}})
	if r.Text == s.Parts[1].Questions[0].Answer || r.Text == "Lena" {
		t.Errorf("script answered a memory question: %q", r.Text)
	}
	if got := KeywordAnswer(""); got != Unknown {
		t.Errorf("empty: %q", got)
	}
	if got := KeywordAnswer("no question here"); got != Unknown {
		t.Errorf("no question: %q", got)
	}
}

package skill

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// The tail guard's key is the word key K of spec/protocol.md §7: the words
// keyText gives each narrative and question of vectors/reflection.json
// (after N: NFC, full case folding, white space collapsed) are the
// vectors' words, the rewritten cases' (look-alikes, zero-width
// characters, fullwidth forms, added diacritics, other scripts' digits)
// those of the plain prose.
func TestKeyMatchesReflectionVectors(t *testing.T) {
	data, err := os.ReadFile("../spec/vectors/reflection.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Cases []struct {
			Name      string   `json:"name"`
			Narrative string   `json:"narrative"`
			Question  string   `json:"question"`
			Words     []string `json:"words"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	n := func(s string) string {
		return strings.Join(strings.Fields(fold(norm.NFC.String(s))), " ")
	}
	runs := func(s string) []string {
		return strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.Is(unicode.Nd, r) })
	}
	if len(v.Cases) < 10 {
		t.Fatalf("%d reflection cases", len(v.Cases))
	}
	for _, c := range v.Cases {
		got := append(runs(keyText(n(c.Narrative))), runs(keyText(n(c.Question)))...)
		if strings.Join(got, " ") != strings.Join(c.Words, " ") {
			t.Errorf("%s: words %q, want %q", c.Name, got, c.Words)
		}
	}
}

// keyText leaves ASCII as written and keys every other character.
func TestKeyTextASCIIUnchanged(t *testing.T) {
	for _, s := range []string{"Which Site's plates?", "CVE-2025-9013", ""} {
		if got := keyText(s); got != s {
			t.Errorf("keyText(%q) = %q", s, got)
		}
	}
	for in, want := range map[string]string{
		"ＣＶＥ-２０２５": "cve-2025", "Kе\u200bssler": "Kessler", "СVЕ": "cVe", "re\u0301agent": "reagent", "Ｓample": "sample",
	} {
		if got := keyText(in); got != want {
			t.Errorf("keyText(%q) = %q, want %q", in, got, want)
		}
	}
}

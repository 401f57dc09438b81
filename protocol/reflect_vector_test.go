package protocol

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

var updateReflectionVector = flag.Bool("update-reflection-vector", false, "rewrite spec/vectors/reflection.json")

var reflectionVectorPath = filepath.Join("..", "spec", "vectors", "reflection.json")

type reflectionVectorCase struct {
	Name          string   `json:"name"`
	Narrative     string   `json:"narrative"`
	Question      string   `json:"question"`
	Normalized    string   `json:"normalized"`
	Digest        string   `json:"digest"`
	Words         []string `json:"words"`
	WordHashes    []string `json:"word_hashes"`
	ShingleHashes []string `json:"shingle_hashes"`
	Sketch        []string `json:"sketch"`
}

type reflectionVectorFile struct {
	Description string                 `json:"description"`
	Cases       []reflectionVectorCase `json:"cases"`
}

const reflectionVectorDescription = "Reflection fingerprints (spec/protocol.md §7): the digest is SHA-256 over N(narrative) || 0x00 || N(question) (normalized, hex; N is NFC, full case folding, then every run of White_Space characters collapsed to one space, none leading or trailing); words are the maximal runs of letters and decimal digits (Unicode categories L and Nd) of the word key K(N(narrative)) then of K(N(question)), K taken character by character: ASCII to lower case; marks (M), format characters (Cf), Variation_Selector and Other_Default_Ignorable_Code_Point characters dropped; a decimal digit (Nd) of any script to the ASCII digit of its value; otherwise K of each character of its NFKD when that differs; otherwise, for a letter, K of its UTS #39 skeleton (confusables.txt 13.0.0) when that key (not the skeleton itself) is all ASCII, else K of its simple upper case's skeleton when that key is all ASCII, else K of its own skeleton when the skeleton differs; otherwise the character itself. A word's hash is FNV-1a 64 taken over its UTF-8 bytes 8 at a time as little-endian 64-bit integers (the last padded with zero bytes): h = 0xcbf29ce484222325, h = (h XOR c) * 0x100000001b3 mod 2^64 per 8 bytes c; a shingle is 5 consecutive words (all the words when there are fewer) and its hash is fmix64(x) with x = 0, x = x * 0x100000001b3 + word_hash mod 2^64 per word in order, fmix64 being MurmurHash3's 64-bit finaliser (x ^= x >> 33; x *= 0xff51afd7ed558ccd; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53; x ^= x >> 33); shingle_hashes are in text order; the sketch is the 64 smallest distinct shingle hashes, ascending. All hashes are 16 lower-case hex digits. The cases named 'rewritten: ...' are rewritings of the case 'plain prose' that a relay could make at no cost: their digests differ from it, their words and sketch do not. Regenerate with go test ./protocol -run TestReflectionVectorRegenerate -update-reflection-vector."

// reflectionVectorInputs are the cases of reflection.json: name,
// narrative, question.
var reflectionVectorInputs = [][3]string{
	{"seven words, ASCII", "Loop L-0042 persisted across three runs.", "Which loop?"},
	{"the same after normalisation", "  LOOP l-0042 Persisted\tacross\n three RUNS. ", "which   LOOP?"},
	{"fewer words than a shingle", "Valve shut", ""},
	{"words of 8, 9, 16 and 17 bytes", "Calibrat thermocou recalibrationsxy recalibrationsxyz held", "Why?"},
	{"non-ASCII: folding, diacritics dropped, Greek letters as their Latin look-alikes", "Straße ΣΊΣΥΦΟΣ café e\u0301 Ångström", "Wo liegt Łódź?"},
	{"look-alikes whose skeleton holds a mark: what must be ASCII is the skeleton's key, not the skeleton (η's skeleton n and U+0329 keys to n, not to h by its capital Η; ƙ's k and U+0314 to k, not to k' by Ƙ; ð's ∂ and U+0335 keys to ∂, so ð is d by its capital's skeleton; ы is bi)", "The ηead ƙit ðrew ыt", "Which kit?"},
	{"more shingles than the sketch holds", reflectionLongNarrative, "Which crate was quarantined, and why?"},
	{"compatibility forms and marks: ² is 2 and Ⅻ is xii (NFKD), ½ is 1, fraction slash, 2 (two words); ٣ is 3; İ folds to i and a combining dot, which is dropped; ﬁ is fi; marks (Mn, Mc, Me) are dropped from words; ΐ is i", "Pump x² rose ½ while Ⅻ held; ٣ units at İstanbul, ﬁle a⃝ ΐ", "Which क्षि?"},
	{"white space is the White_Space property: U+2028, U+3000, U+0085, U+00A0, U+2003, U+202F and a vertical tab collapse to one space; U+200B and U+180E are no white space, and the word key drops them (T-4\u200bheld is t, 4held)", "Tank\u2028T-4\u200bheld\u00a0\u180e at\u3000the\u0085dock\u000bnow", "Which\u2003tank\u202f?"},
	{"plain prose", "The pump held steady at 42 kPa while Station Seven vented.", "Which station vented?"},
	{"rewritten: Cyrillic and Greek look-alikes, small and capital", "Тhе рumр hеld ѕtеаdу аt 42 kΡа whіlе Ѕtаtіоn Ѕеvеn vеntеd.", "Whісh ѕtаtіоn vеntеd?"},
	{"rewritten: zero-width space, joiners, word joiner, byte order mark, soft hyphen, bidi marks and variation selectors inside words", "T\u200bhe p\u200dump h\u200celd st\u2060eady a\ufefft 4\u00ad2 k\u200ePa wh\u202aile St\u202cation Se\ufe0fven ve\U000e0100nted.", "Wh\u2066ich sta\u2069tion ven\u200bted?"},
	{"rewritten: fullwidth and mathematical letters and digits", "Ｔｈｅ ｐｕｍｐ ｈｅｌｄ ｓｔｅａｄｙ ａｔ ４２ 𝐤𝐏𝐚 𝑤ℎ𝑖𝑙𝑒 𝕊𝕥𝕒𝕥𝕚𝕠𝕟 𝖲𝖾𝗏𝖾𝗇 vented．", "Ｗｈｉｃｈ ｓｔａｔｉｏｎ ｖｅｎｔｅｄ？"},
	{"rewritten: diacritics added, precomposed and combining", "Thé pümp hèld stëady àt 42 kPâ whi\u0301le Sta\u0308tion Se\u0300ven ve\u0302nted.", "Whích státîon vēnted?"},
	{"rewritten: digits of other scripts, other spaces and punctuation", "The\u00a0pump\u2009held steady\u3000at ٤٢ kPa while Station Seven vented。", "Which station vented？"},
}

const reflectionLongNarrative = "At 06:10 the cold room logger at the central depot recorded a door event while crate C-14 was still on the ramp. The night shift moved C-14 back inside within four minutes, but crate C-9, which had been staged behind it, stayed on the ramp until the morning supervisor arrived at 06:55 and signed the deviation form. The probe in C-9 showed a peak of 9.4 degrees, above the 8 degree limit for the vaccine lots it carried, so quality assurance quarantined those lots pending a stability review, while C-14, whose probe never passed 6.1 degrees, was released with the rest of the morning shipment."

func hexes(hs []uint64) []string {
	s := []string{}
	for _, h := range hs {
		s = append(s, fmt.Sprintf("%016x", h))
	}
	return s
}

func reflectionBuildVector(t *testing.T) reflectionVectorFile {
	f := reflectionVectorFile{Description: reflectionVectorDescription}
	for _, in := range reflectionVectorInputs {
		n, q := NormalizeChallengeText(in[1]), NormalizeChallengeText(in[2])
		c := reflectionVectorCase{Name: in[0], Narrative: in[1], Question: in[2], Normalized: n + "\x00" + q}
		sum := sha256.Sum256([]byte(c.Normalized))
		c.Digest = hex.EncodeToString(sum[:])
		c.Words = append(append([]string{}, challengeWords(n)...), challengeWords(q)...)
		var wh, sh []uint64
		for _, w := range c.Words {
			wh = append(wh, wordHash(w))
		}
		k := min(ShingleWords, len(c.Words))
		for i := 0; i+k <= len(c.Words) && k > 0; i++ {
			sh = append(sh, shingleHash(c.Words[i:i+k]))
		}
		c.WordHashes, c.ShingleHashes = hexes(wh), hexes(sh)
		c.Sketch = hexes(challengeDigestGeneral(in[1], in[2]).sketch)
		f.Cases = append(f.Cases, c)
	}
	return f
}

// TestReflectionVectorRegenerate checks that spec/vectors/reflection.json
// holds what the cases' inputs give; with -update-reflection-vector it
// rewrites it. The rewritten cases have the plain one's words.
func TestReflectionVectorRegenerate(t *testing.T) {
	want := reflectionBuildVector(t)
	var plain *reflectionVectorCase
	for i, c := range want.Cases {
		switch {
		case c.Name == "plain prose":
			plain = &want.Cases[i]
		case plain != nil && len(c.Name) > 10 && c.Name[:10] == "rewritten:":
			if !reflect.DeepEqual(c.Words, plain.Words) || c.Digest == plain.Digest {
				t.Errorf("%s: words %q (digest %s), plain prose %q (%s)", c.Name, c.Words, c.Digest, plain.Words, plain.Digest)
			}
		}
	}
	if *updateReflectionVector {
		out, err := json.MarshalIndent(want, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(reflectionVectorPath, append(out, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	var got reflectionVectorFile
	loadVector(t, "reflection.json", &got)
	if !reflect.DeepEqual(got, want) {
		t.Fatal("spec/vectors/reflection.json is stale (run go test ./protocol -run TestReflectionVectorRegenerate -update-reflection-vector and review the diff)")
	}
}

package testutil

import (
	"regexp"
	"sort"
	"strings"
	"unicode"
)

// NewKeywordScript returns the brain of a scripted attacker without
// language understanding: see KeywordAnswer. It is deterministic and safe
// for concurrent use.
func NewKeywordScript() Brain {
	return BrainFunc(func(req BrainRequest) BrainReply {
		msg, ok := req.LastUser()
		if !ok {
			return BrainReply{Text: Unknown}
		}
		return BrainReply{Text: KeywordAnswer(msg)}
	})
}

var (
	sentenceEnd = regexp.MustCompile(`[.!?;]+(?:\s+|$)|\n+`)
	wordRe      = regexp.MustCompile(`[\p{L}\p{N}][\p{L}\p{N}'’\-]*`)
	labelRe     = regexp.MustCompile(`(?i)^\s*(?:question|q)\s*[:.]\s*`)
)

var stopwords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a an the and or but if then than that this these those of in on at to from by for with
		without into onto over under after before during while when where which who whom whose what why how is are was were be been
		being do does did has have had not no yes it its it's they them their there here he she his her him we our you your i me my
		as so such also only just very more most less least each every any all some many much other another same one first second
		third last next round domain narrative question answer reply data marker lines below above between ignore instructions
		untrusted read facts inside end`) {
		stopwords[w] = true
	}
}

// KeywordAnswer answers the question in message the way a keyword-matching
// script would: the question is the last line with a question mark; the
// rest is split into sentences, each scored by how many of the
// question's content words it contains; from the best-scoring sentences
// down, it answers the first token that looks like an answer (capitalised,
// or containing a digit) and does not occur in the question. It answers
// Unknown when nothing fits.
func KeywordAnswer(message string) string {
	lines := strings.Split(message, "\n")
	qi := -1
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], "?") {
			qi = i
			break
		}
	}
	if qi < 0 {
		for i := len(lines) - 1; i >= 0; i-- {
			if strings.TrimSpace(lines[i]) != "" {
				qi = i
				break
			}
		}
	}
	if qi < 0 {
		return Unknown
	}
	question := labelRe.ReplaceAllString(lines[qi], "")
	var body []string
	for i, l := range lines {
		// Skip the question and markup lines such as "<<<DATA>>>".
		if i != qi && !strings.HasPrefix(strings.TrimSpace(l), "<<<") {
			body = append(body, l)
		}
	}

	qwords := map[string]bool{} // every question word, to exclude as answers
	content := map[string]bool{}
	for _, w := range wordRe.FindAllString(question, -1) {
		lw := strings.ToLower(w)
		qwords[lw] = true
		if len([]rune(lw)) >= 3 && !stopwords[lw] {
			content[lw] = true
		}
	}

	type scored struct {
		words []string
		score int
	}
	var sentences []scored
	for _, s := range sentenceEnd.Split(strings.Join(body, "\n"), -1) {
		words := wordRe.FindAllString(s, -1)
		if len(words) == 0 {
			continue
		}
		seen := map[string]bool{}
		score := 0
		for _, w := range words {
			lw := strings.ToLower(w)
			if content[lw] && !seen[lw] {
				seen[lw] = true
				score++
			}
		}
		sentences = append(sentences, scored{words: words, score: score})
	}
	sort.SliceStable(sentences, func(i, j int) bool { return sentences[i].score > sentences[j].score })
	for _, s := range sentences {
		if s.score == 0 {
			break
		}
		for _, w := range s.words {
			lw := strings.ToLower(w)
			if qwords[lw] || stopwords[lw] {
				continue
			}
			if looksLikeAnswer(w) {
				return strings.TrimRight(w, "'’-")
			}
		}
	}
	return Unknown
}

// looksLikeAnswer reports whether w is a capitalised word or an
// identifier or number (contains a digit).
func looksLikeAnswer(w string) bool {
	for _, r := range w {
		if unicode.IsDigit(r) {
			return true
		}
	}
	r := []rune(w)
	return len(r) > 1 && unicode.IsUpper(r[0])
}

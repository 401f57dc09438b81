package main

import (
	"context"
	"strings"
	"unicode"

	"github.com/acaptcha/acaptcha/skill"
)

// keywordScript is the demo's stand-in for a script: it has no language
// understanding, only word overlap.
type keywordScript struct{}

func (keywordScript) NewSession() skill.Answerer {
	return skill.AnswerFunc(func(_ context.Context, c skill.Challenge) (string, error) {
		return keywordGuess(c), nil
	})
}

// keywordGuess returns the identifier-like token of the sentence that
// shares the most words with the question.
func keywordGuess(c skill.Challenge) string {
	qwords := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(c.Question), notWord) {
		if len(w) > 3 {
			qwords[w] = true
		}
	}
	best, bestScore := "", -1
	for _, sent := range strings.FieldsFunc(c.Narrative, func(r rune) bool { return r == '.' || r == '\n' }) {
		score := 0
		var cand string
		for _, w := range strings.FieldsFunc(sent, notWord) {
			if qwords[strings.ToLower(w)] {
				score++
			}
			if cand == "" && identifierLike(w) {
				cand = w
			}
		}
		if cand != "" && score > bestScore {
			best, bestScore = cand, score
		}
	}
	if best == "" {
		return "unknown"
	}
	return best
}

func notWord(r rune) bool {
	return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_')
}

func identifierLike(w string) bool {
	upper, digit := 0, 0
	for _, r := range w {
		if unicode.IsUpper(r) {
			upper++
		}
		if unicode.IsDigit(r) {
			digit++
		}
	}
	return len(w) >= 2 && (upper >= 2 || (upper >= 1 && digit >= 1))
}

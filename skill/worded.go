package skill

import "maps"

// WordedVariant returns the first accepted variant of q whose words
// (Words, after the Hyphens step) are each a function word or a
// description word of the texts a prover is shown with q (shown: the
// narratives up to its part; and q's own text), at least one a
// description word, and none a joining word: a variant an answer could
// carry as description words beside another candidate's, and another
// candidate's beside it (spec/generation.md stage 1b). The validator asks
// it with the judge's own word lists and description words, so the two
// cannot drift apart.
func WordedVariant(q *Question, shown []string) (string, bool) {
	vocab := map[string]bool{}
	for _, t := range shown {
		maps.Copy(vocab, lowerVocab(asciiForms(t)))
	}
	maps.Copy(vocab, lowerVocab(asciiForms(q.Question)))
	for _, v := range q.Variants() {
		ws := Words(asciiForms(v))
		if len(ws) == 0 {
			continue
		}
		ok, content := true, false
		for _, w := range ws {
			switch {
			case joinWords[w.Text]:
				ok = false
			case functionWords[w.Text]:
			case w.Number == nil && vocab[w.Text]:
				content = true
			default:
				ok = false
			}
		}
		if ok && content {
			return v, true
		}
	}
	return "", false
}

// DescriptionWords returns the description words of text
// (spec/verification.md: its lower-case raw words without digits, the
// unit after a number's digits included), as the judge reads them. The
// map is the caller's.
func DescriptionWords(text string) map[string]bool {
	return maps.Clone(lowerVocab(asciiForms(text)))
}

// FunctionWord and JoiningWord report whether a word (a Word's Text) is
// in the lists of spec/verification.md "Normalisation and words".
func FunctionWord(w string) bool { return functionWords[w] }

// JoiningWord: see FunctionWord.
func JoiningWord(w string) bool { return joinWords[w] }

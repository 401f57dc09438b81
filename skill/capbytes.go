package skill

import "unicode/utf8"

// CapBytes cuts s to at most n bytes without splitting a UTF-8 sequence:
// when byte n falls inside a multi-byte character, the cut moves back to
// that character's start. It is the one string cap of the project (answers
// for the transcript digest, decline details, logged and wire strings).
func CapBytes(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

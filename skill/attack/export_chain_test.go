package attack

// The chained-round attacker's readings, for the external measurement
// tests' other chained-round and position scripts.
var (
	ChainCands           = chainCands
	ChainQWords          = chainQWords
	ChainOverlap         = chainOverlap
	ChainSentenceOverlap = chainSentenceOverlap
	ChainIsNumeric       = chainIsNumeric
	ChainNumbers         = chainNumbers
	ChainPick            = chainPick
)

package attack

// SurvivorDepth exposes survivorDepth to the external measurement tests.
var SurvivorDepth = survivorDepth

package attestation

import (
	"errors"
	"math"
	"testing"
)

// Decoding errors name the field, with its round's number for a
// round's, as they did when names were built with + before each check.
func TestFieldNamesInErrors(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{func() error { _, err := uint32ToInt(field{2, "narrative tokens"}, math.MaxUint32); return err }(),
			"malformed attestation: round 2 narrative tokens 4294967295 too large"},
		{func() error { _, err := msToDuration(field{3, "budget"}, math.MaxUint64); return err }(),
			"malformed attestation: round 3 budget of 18446744073709551615 ms exceeds 24h0m0s"},
		{func() error { _, err := intToUint32(field{0, "failed round"}, -1); return err }(),
			"malformed attestation: failed round -1 outside 0..4294967295"},
	} {
		if !errors.Is(c.err, ErrMalformed) || c.err.Error() != c.want {
			t.Errorf("error %q, want %q (wrapping ErrMalformed)", c.err, c.want)
		}
	}
	if _, err := uint32ToInt(field{1, "number"}, 3); err != nil {
		t.Errorf("round 1 number 3: %v", err)
	}
}

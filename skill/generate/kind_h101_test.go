package generate

import (
	"testing"

	"github.com/acaptcha/acaptcha/skill"
)

// TestGeneratorsReportKind: the LLM and hybrid generators say the kind of
// the sets they make (skill.Provenancer), which a pool.Pool over them
// reports in turn (helper-101).
func TestGeneratorsReportKind(t *testing.T) {
	for _, tc := range []struct {
		p    skill.Provenancer
		want skill.SourceKind
	}{{(*Generator)(nil), skill.SourceLLM}, {(*Hybrid)(nil), skill.SourceHybrid}} {
		if got := tc.p.Kind(); got != tc.want {
			t.Errorf("%T: Kind %q, want %q", tc.p, got, tc.want)
		}
	}
}

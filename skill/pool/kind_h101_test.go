package pool

import (
	"context"
	"strings"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
)

// idle produces nothing until its context ends.
type idle struct{}

func (idle) Produce(ctx context.Context) (*skill.Set, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// kinded is idle with a kind (a skill.Provenancer producer).
type kinded struct {
	idle
	k skill.SourceKind
}

func (k kinded) Kind() skill.SourceKind { return k.k }

// TestPoolReportsKind (helper-101): a Pool reported no kind, so a
// library node serving one without peer.Config.SourceKind took its
// challenges for an unknown source: no start-up warning about a weak
// producer, no source policy in first contact, and a pool writing its
// first LLM sets warned as used up. It now reports its producer's kind,
// or Config.Kind, and refuses a kind with no rank.
func TestPoolReportsKind(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		prod Producer
		want skill.SourceKind
	}{
		{"producer's kind", Config{}, kinded{k: skill.SourceHybrid}, skill.SourceHybrid},
		{"Config.Kind wins", Config{Kind: skill.SourceProcedural}, kinded{k: skill.SourceLLM}, skill.SourceProcedural},
		{"neither says", Config{}, idle{}, skill.SourceUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.cfg, tc.prod)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			var src skill.Source = p
			pv, ok := src.(skill.Provenancer)
			if !ok {
				t.Fatal("Pool is no skill.Provenancer")
			}
			if got := pv.Kind(); got != tc.want {
				t.Errorf("Kind %q, want %q", got, tc.want)
			}
		})
	}
	if p, err := New(Config{Kind: "LLM-ish"}, idle{}); err == nil {
		p.Close()
		t.Error("New took a kind with no rank")
	} else if !strings.Contains(err.Error(), "kind") {
		t.Errorf("error %q does not name the kind", err)
	}
}

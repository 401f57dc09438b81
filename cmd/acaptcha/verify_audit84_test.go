package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
)

// audit84: --require-source "" (a script's --require-source "$MIN" with
// MIN unset) verified a procedural record as if no minimum had been asked
// (exit 0, VALID), where the HTTP door's verify route refuses an empty
// require_source (http.md §4.6: it would widen the check without a
// word). Given empty or blank, the flag is now a usage error; left out, it
// means any, as before.
func TestAttestationsVerifyAudit84EmptyRequireSource(t *testing.T) {
	issuerKey, _ := testKey(t)
	_, subject := testKey(t)
	_, env := sealAcceptedFrom(t, issuerKey, subject, skill.SourceProcedural)
	f := filepath.Join(t.TempDir(), "procedural.bin")
	if err := os.WriteFile(f, env, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, v := range []string{"", " ", "\t"} {
		out, errOut, code := peersMain(t, ctx, "attestations", "verify", f, "--require-source", v)
		if code != exitUsage {
			t.Errorf("--require-source %q: exit %d, want %d (usage)\n%s\n%s", v, code, exitUsage, out, errOut)
		}
	}
	for _, args := range [][]string{{f}, {f, "--require-source", "any"}, {f, "--require-source", " any "}, {f, "--require-source", "procedural"}} {
		if out, errOut, code := peersMain(t, ctx, append([]string{"attestations", "verify"}, args...)...); code != exitOK {
			t.Errorf("%q: exit %d, want %d\n%s\n%s", args, code, exitOK, out, errOut)
		}
	}
}

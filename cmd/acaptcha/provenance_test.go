package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	lpeer "github.com/libp2p/go-libp2p/core/peer"

	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/skill"
)

// TestAttestationsVerifyRequireSource is the acceptance case of the
// challenge-source policy: an attestation backed by procedural challenges
// verifies, and is refused by --require-source llm.
func TestAttestationsVerifyRequireSource(t *testing.T) {
	dir := t.TempDir()
	issuerKey, _ := testKey(t)
	_, subject := testKey(t)
	write := func(name string, src skill.SourceKind) string {
		_, env := sealAcceptedFrom(t, issuerKey, subject, src)
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, env, 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	procedural := write("procedural.bin", skill.SourceProcedural)
	hybrid := write("hybrid.bin", skill.SourceHybrid)
	none := write("none.bin", skill.SourceUnknown)
	ctx := context.Background()

	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		stdout  []string
		without []string
	}{
		{"procedural, no requirement", []string{procedural}, exitOK, []string{"VALID signed attestation", "source   procedural (rank 1)", "a script written against this code passes procedural challenges"}, nil},
		{"procedural, require llm", []string{procedural, "--require-source", "llm"}, exitRejected, []string{"REFUSED", "procedural (rank 1)", "at least llm (rank 3)"}, []string{"VALID"}},
		{"procedural, require hybrid", []string{procedural, "--require-source", "hybrid"}, exitRejected, []string{"REFUSED"}, nil},
		{"procedural, require procedural", []string{procedural, "--require-source", "procedural"}, exitOK, []string{"VALID"}, nil},
		{"procedural, require any", []string{procedural, "--require-source", "any"}, exitOK, []string{"VALID"}, nil},
		{"hybrid, require llm", []string{hybrid, "--require-source", "llm"}, exitOK, []string{"VALID", "source   hybrid (rank 3)"}, nil},
		{"no provenance, require procedural", []string{none, "--require-source", "procedural"}, exitRejected, []string{"REFUSED", "unknown (rank 0)"}, nil},
		{"no provenance, no requirement", []string{none}, exitOK, []string{"source   unknown (rank 0)", "the record names no source"}, nil},
		{"bad kind", []string{procedural, "--require-source", "gpt"}, exitUsage, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := peersMain(t, ctx, append([]string{"attestations", "verify"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s\n%s", code, tc.code, out, errOut)
			}
			for _, w := range tc.stdout {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.without {
				if strings.Contains(out, w) {
					t.Errorf("output has %q:\n%s", w, out)
				}
			}
		})
	}

	// The JSON forms: the refusal says why; the view carries the provenance.
	out, _, code := peersMain(t, ctx, "attestations", "verify", procedural, "--require-source", "llm", "--json")
	var refused struct {
		Valid bool   `json:"valid"`
		Error string `json:"error"`
		Code  string `json:"error_code"`
		Weak  bool   `json:"source_below_minimum"`
	}
	if err := json.Unmarshal([]byte(out), &refused); err != nil || code != exitRejected || refused.Valid || !refused.Weak || !strings.Contains(refused.Error, "procedural") ||
		refused.Code != "source_below_minimum" {
		t.Fatalf("JSON refusal (exit %d, %v):\n%s", code, err, out)
	}
	out, _, code = peersMain(t, ctx, "attestations", "verify", hybrid, "--json")
	var ok struct {
		Attestation struct {
			Provenance struct {
				Source string `json:"source"`
				Rank   int    `json:"rank"`
			} `json:"provenance"`
		} `json:"attestation"`
	}
	if err := json.Unmarshal([]byte(out), &ok); err != nil || code != exitOK || ok.Attestation.Provenance.Source != "hybrid" || ok.Attestation.Provenance.Rank != 3 {
		t.Fatalf("JSON view (exit %d, %v):\n%s", code, err, out)
	}
}

// TestStoredProvenanceShownAndPolicy: list and show print the source of
// stored records, and peers evaluates admissions with --require-source.
func TestStoredProvenanceShownAndPolicy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	st, err := peer.OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	selfKey, _ := testKey(t)
	_, weak := testKey(t)
	_, strong := testKey(t)
	for p, src := range map[lpeer.ID]skill.SourceKind{weak: skill.SourceProcedural, strong: skill.SourceLLM} {
		a, env := sealAcceptedFrom(t, selfKey, p, src)
		if err := st.Put(peer.Issued, env, a); err != nil {
			t.Fatal(err)
		}
	}
	es, err := st.List(peer.Issued, weak)
	if err != nil || len(es) != 1 {
		t.Fatalf("list: %v", err)
	}
	key, env := es[0].Key, es[0].Envelope
	st.Close()
	ctx := context.Background()

	out, _, code := peersMain(t, ctx, "attestations", "list", "--store", path)
	if code != exitOK || !strings.Contains(out, "SOURCE") || !strings.Contains(out, "procedural") || !strings.Contains(out, "llm") {
		t.Fatalf("list (exit %d):\n%s", code, out)
	}
	out, _, code = peersMain(t, ctx, "attestations", "show", "--store", path, key)
	if code != exitOK || !strings.Contains(out, "source   procedural (rank 1), questions not LLM-worded; a script written against this code passes procedural challenges") {
		t.Fatalf("show (exit %d):\n%s", code, out)
	}
	out, _, code = peersMain(t, ctx, "attestations", "show", "--store", path, key, "--json")
	var shown struct {
		EnvelopeHex string `json:"envelope_hex"`
		Attestation struct {
			Provenance struct {
				Source string `json:"source"`
			} `json:"provenance"`
		} `json:"attestation"`
	}
	if err := json.Unmarshal([]byte(out), &shown); err != nil || code != exitOK || shown.Attestation.Provenance.Source != "procedural" || shown.EnvelopeHex != hex.EncodeToString(env) {
		t.Fatalf("show --json (exit %d, %v):\n%s", code, err, out)
	}

	admitted := func(args ...string) map[lpeer.ID]peer.PeerInfo {
		t.Helper()
		out, errOut, code := peersMain(t, ctx, append([]string{"peers", "--store", path, "--json"}, args...)...)
		if code != exitOK {
			t.Fatalf("peers %v: exit %d: %s", args, code, errOut)
		}
		var rep peersReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		m := map[lpeer.ID]peer.PeerInfo{}
		for _, p := range rep.Peers {
			m[p.Peer] = p
		}
		return m
	}
	byDefault := admitted()
	if a := byDefault[weak].Admission; a.Admitted || a.Reason != peer.NotAdmittedSource {
		t.Fatalf("default policy, procedural-backed peer: %+v", a)
	}
	if a := byDefault[strong].Admission; !a.Admitted {
		t.Fatalf("default policy, llm-backed peer: %+v", a)
	}
	if a := admitted("--require-source", "procedural")[weak].Admission; !a.Admitted {
		t.Fatalf("procedural policy, procedural-backed peer: %+v", a)
	}
	// Not admitted: --peer prints why and exits 1.
	out, _, code = peersMain(t, ctx, "peers", "--store", path, "--peer", weak.String())
	if code != exitRejected || !strings.Contains(out, "NOT ADMITTED (source_below_minimum)") || !strings.Contains(out, "source procedural (below policy)") || !strings.Contains(out, "require source hybrid") {
		t.Fatalf("peers text (exit %d):\n%s", code, out)
	}
	if _, _, code := peersMain(t, ctx, "peers", "--store", path, "--require-source", "gpt"); code != exitUsage {
		t.Fatalf("bad --require-source: exit %d", code)
	}
}

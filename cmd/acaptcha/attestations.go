package main

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/spf13/cobra"

	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/peer/mcpserver"
	"github.com/acaptcha/acaptcha/protocol"
	"github.com/acaptcha/acaptcha/skill"
)

func (a *app) attestationsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "attestations",
		Short: "List, show, export and verify signed attestations",
	}
	var peerFilter, dir string
	var newest int
	list := &cobra.Command{
		Use:   "list",
		Short: "List the attestations in the store (issued by this node and received from verifiers), oldest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The flags first: a bad one is named whether or not the
			// store is there.
			var p lpeer.ID
			var err error
			if peerFilter != "" {
				if p, err = decodePeerFlag("--peer", peerFilter); err != nil {
					return err
				}
			}
			if dir == "both" {
				// The default the help names.
				dir = ""
			}
			switch peer.Direction(dir) {
			case "", peer.Issued, peer.Received:
			default:
				return usageErr("--direction %q: want %s, %s or both (the default)", dir, peer.Issued, peer.Received)
			}
			if newest < 0 {
				return usageErr("--newest %d: want 0 (every attestation) or more", newest)
			}
			st, err := a.openExistingStore(listLockedHint)
			if err != nil {
				return err
			}
			defer st.Close()
			var es []peer.Entry
			total := 0
			if newest > 0 {
				// Only the records shown are copied out, decoded and
				// verified (a node can hold some 744,000 issued ones).
				es, total, err = st.ListNewest(peer.Direction(dir), p, newest)
			} else {
				es, err = st.List(peer.Direction(dir), p)
				total = len(es)
			}
			if err != nil {
				return fmt.Errorf("read store %s: %w", a.storePath, err)
			}
			// Oldest first, as a log reads (the store's order is its
			// keys': direction, then peer).
			slices.SortStableFunc(es, func(x, y peer.Entry) int {
				return cmp.Or(x.Attestation.IssuedAt.Compare(y.Attestation.IssuedAt), cmp.Compare(x.Key, y.Key))
			})
			if a.jsonOut {
				out := []any{}
				for _, e := range es {
					out = append(out, map[string]any{"key": e.Key, "direction": e.Direction, "attestation": e.Attestation, "envelope_hex": hex.EncodeToString(e.Envelope)})
				}
				if len(es) < total {
					// Standard output stays the array that verify -
					// and jq read (a list of one verifies that
					// record); what --newest left out goes to
					// standard error, a JSON line as the logs are.
					a.log.Warn("listed only the newest attestations (--newest 0 lists them all)", "listed", len(es), "total", total, "omitted", total-len(es))
				}
				return writeJSON(a, out)
			}
			if len(es) == 0 {
				fmt.Fprintln(a.stdout, "no attestations")
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY\tDIRECTION\tISSUER\tSUBJECT\tVERDICT\tREASON\tSOURCE\tISSUED\tVALID")
			now := time.Now()
			for _, e := range es {
				at := e.Attestation
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%v\n", shortKey(e.Key), e.Direction, short(at.Issuer.String()), short(at.Subject.String()),
					verdictWord(at.Accepted, at.Reason), at.Reason, protocol.SourceName(at.Provenance.Source), at.IssuedAt.Format(time.RFC3339), at.Valid(now))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(es) < total {
				fmt.Fprintf(a.stdout, "(the %d newest of %d attestations; --newest 0 lists them all)\n", len(es), total)
			}
			return nil
		},
	}
	list.Flags().StringVar(&peerFilter, "peer", "", "only attestations about or from this peer ID")
	list.Flags().StringVar(&dir, "direction", "", "issued, received or both (default both)")
	list.Flags().IntVar(&newest, "newest", 0, "only the N newest attestations, still listed oldest first, with a line saying how many were left out (on standard error under --json: listed, total, omitted) (0: all; a node can hold hundreds of thousands)")

	show := &cobra.Command{
		Use:   "show KEY",
		Short: "Show one stored attestation (KEY as printed by list)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := a.storedEntry(args[0])
			if err != nil {
				return err
			}
			return a.printAttestation(e.Attestation, e.Envelope, string(e.Direction), nil)
		},
	}
	var out string
	export := &cobra.Command{
		Use:   "export KEY",
		Short: "Write one stored attestation's signed envelope to a file (binary) for others to verify",
		Long: `Writes the signed envelope of the stored attestation KEY (as printed by
list) to --out, or raw to standard output (in hex when standard output is a
terminal and --out is not "-"). With --json it prints a JSON object
{key, file, bytes, envelope_base64, envelope_hex} instead (file only with
--out): the envelope in base64 as the HTTP door's verify takes it, and in hex
as acaptcha attestations verify reads it. An existing --out file is written
over only when it is empty or holds an attestation (an earlier export): the
store, a key or any other file is refused (exit 2) and left as it was.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			toStdout := out == "" || out == "-"
			if !toStdout {
				if err := checkExportTarget(out); err != nil {
					return err
				}
			}
			e, err := a.storedEntry(args[0])
			if err != nil {
				return err
			}
			if !toStdout {
				if err := os.WriteFile(out, e.Envelope, 0o644); err != nil {
					return fmt.Errorf("write %s: %w", out, err)
				}
			}
			switch {
			case a.jsonOut:
				// The envelope in the object, as the HTTP door takes it
				// (base64) and as verify reads it (hex).
				res := map[string]any{"key": e.Key, "bytes": len(e.Envelope),
					"envelope_base64": base64.StdEncoding.EncodeToString(e.Envelope), "envelope_hex": hex.EncodeToString(e.Envelope)}
				if !toStdout {
					res["file"] = out
				}
				return writeJSON(a, res)
			case toStdout && out == "" && isTerminal(a.stdout):
				// Raw bytes would garble the terminal: hex, which
				// verify reads as well; -o - writes the bytes.
				fmt.Fprintln(a.stdout, hex.EncodeToString(e.Envelope))
				fmt.Fprintln(a.stderr, "standard output is a terminal: the envelope is written in hex (acaptcha attestations verify reads it); -o FILE or -o - writes the raw bytes")
				return nil
			case toStdout:
				_, err = a.stdout.Write(e.Envelope)
				return err
			}
			fmt.Fprintf(a.stderr, "wrote %s (%d bytes)\n", out, len(e.Envelope))
			return nil
		},
	}
	export.Flags().StringVarP(&out, "out", "o", "", "output file (default standard output; an existing file only if it holds an attestation)")

	var subject, issuer, requireSource string
	var allowExpired, anyVerdict bool
	verify := &cobra.Command{
		Use:   "verify FILE",
		Short: "Verify an exported attestation (binary envelope, hex, base64 or the JSON of export --json): signature, issuer key, subject, expiry, challenge source",
		Long: `Verifies a signed attestation envelope: the signature, that the signing key
belongs to the issuer named inside, the expected subject and issuer when given,
the validity window and the spec version, and with --require-source KIND that
the challenges behind it came from a source ranked at least KIND (procedural 1,
corpus 2, hybrid and llm 3; a record that names no source ranks 0): a script
written against this code passes procedural challenges, so --require-source
hybrid (or llm) accepts only LLM-written or LLM-reworded ones. FILE may hold
the raw envelope, its hex (xxd -p) or base64 encoding, or a JSON object
holding it (export --json, the HTTP door's and the MCP tools' output); -
reads standard input (from a terminal, after a line on standard error
saying so: paste the record and end with Ctrl-D).

Exit codes: 0 when the record is valid and its verdict is ACCEPTED; 1 when it
is not valid (bad signature, malformed, expired, wrong subject or issuer,
source below --require-source, larger than the size cap), or when it is valid
but records a verdict that is not an acceptance (rejected, declined,
inconclusive: "VALID signature, verdict REJECTED (reason)"), unless
--any-verdict is given; 2 on usage errors (unreadable FILE, bad flags).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			// The flags first: a bad one is refused before verify waits
			// for standard input (from a terminal, for a paste and
			// Ctrl-D that it would then refuse anyway).
			opts := protocol.VerifyOptions{AllowExpired: allowExpired}
			if cmd.Flags().Changed("require-source") && strings.TrimSpace(requireSource) == "" {
				// As the HTTP door's verify route (http.md §4.6): an empty
				// value from an unset shell variable (--require-source
				// "$MIN") would widen the check to any source without a
				// word. Leaving the flag out means any.
				return usageErr("--require-source is empty: want procedural, corpus, hybrid, llm or any (or leave the flag out)")
			}
			if requireSource != "" && !strings.EqualFold(strings.TrimSpace(requireSource), "any") {
				if opts.MinSource, err = skill.ParseSourceKind(requireSource); err != nil {
					return usageErr("--require-source: %v, or any", err)
				}
			}
			if subject != "" {
				if opts.Subject, err = decodePeerFlag("--subject", subject); err != nil {
					return err
				}
			}
			if issuer != "" {
				if opts.Issuer, err = decodePeerFlag("--issuer", issuer); err != nil {
					return err
				}
			}
			var data []byte
			if args[0] == "-" {
				if stdinIsTerminal(a.stdin) {
					// Nothing is piped in: verify waits for a paste,
					// which looked like a hang. A paste of export's
					// hex is a use (export writes hex to a terminal),
					// so this says what it waits for rather than
					// refusing.
					if a.jsonOut {
						a.log.Warn(stdinHint)
					} else {
						fmt.Fprintln(a.stderr, stdinHint)
					}
				}
				data, err = readAllCapped(a.stdin, 4*protocol.MaxEnvelopeBytes)
			} else {
				data, err = readFileCapped(args[0], 4*protocol.MaxEnvelopeBytes)
			}
			if errors.Is(err, errInputTooLarge) {
				// An oversized record is an invalid record, not a usage error.
				if a.jsonOut {
					_ = writeJSON(a, map[string]any{"ok": false, "valid": false, "accepted": false, "error": err.Error(), "error_code": protocol.AttestationErrorCode(protocol.ErrTooLarge), "source_below_minimum": false})
				} else {
					fmt.Fprintf(a.stdout, "INVALID: %v\n", err)
				}
				return verdictErr(err)
			}
			if err != nil {
				return usageErr("%v", err)
			}
			// Text (hex, base64, or the JSON of export --json, the HTTP
			// door or the MCP tools) is decoded as the MCP tool does;
			// anything else is the envelope's bytes.
			if utf8.Valid(data) {
				b, derr := mcpserver.DecodeRecord(string(data))
				switch {
				case derr == nil:
					data = b
				case bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")), bytes.HasPrefix(bytes.TrimSpace(data), []byte("[")):
					// JSON that holds no envelope (or a list of more
					// than one, as list --json prints): say so, rather
					// than "cannot parse invalid wire-format data".
					err := fmt.Errorf("%w: %v", protocol.ErrMalformed, derr)
					if a.jsonOut {
						_ = writeJSON(a, map[string]any{"ok": false, "valid": false, "accepted": false, "error": err.Error(), "error_code": protocol.AttestationErrorCode(err), "source_below_minimum": false})
					} else {
						fmt.Fprintf(a.stdout, "INVALID: %v\n", err)
					}
					return verdictErr(err)
				}
			}
			at, _, err := protocol.VerifyAttestation(data, opts)
			if err != nil {
				weak := errors.Is(err, protocol.ErrSourceBelowMinimum)
				switch {
				case a.jsonOut:
					_ = writeJSON(a, map[string]any{"ok": false, "valid": false, "accepted": false, "error": err.Error(), "error_code": protocol.AttestationErrorCode(err), "source_below_minimum": weak})
				case weak:
					// Signed and valid, but refused by the caller's policy.
					fmt.Fprintf(a.stdout, "REFUSED: %v\n", err)
				default:
					fmt.Fprintf(a.stdout, "INVALID: %v\n", err)
				}
				return verdictErr(err)
			}
			if !a.jsonOut {
				if at.Accepted {
					fmt.Fprintln(a.stdout, "VALID signed attestation, verdict ACCEPTED")
				} else {
					// A valid signature on a verdict that admits nobody: a
					// script doing `verify F && admit` must not admit.
					fmt.Fprintf(a.stdout, "VALID signature, verdict %s (%s)\n", verdictWord(at.Accepted, at.Reason), at.Reason)
				}
			}
			ok := at.Accepted || anyVerdict
			var notAccepted error
			// The fields of the HTTP door's and the MCP tool's verify
			// (spec/http.md §4.6): ok is this command's exit status 0.
			res := map[string]any{"ok": ok, "verdict": verdictWord(at.Accepted, at.Reason), "reason": at.Reason, "source_below_minimum": false}
			if !ok {
				notAccepted = fmt.Errorf("attestation of %s records verdict %s (%s), not an acceptance", at.Subject, verdictWord(at.Accepted, at.Reason), at.Reason)
				res["error"], res["error_code"] = notAccepted.Error(), notAcceptedCode
			}
			if err := a.printAttestation(at, data, "", res); err != nil {
				return err
			}
			if notAccepted != nil {
				return verdictErr(notAccepted)
			}
			return nil
		},
	}
	verify.Flags().StringVar(&subject, "subject", "", "expected subject peer ID")
	verify.Flags().StringVar(&issuer, "issuer", "", "expected issuer peer ID")
	verify.Flags().BoolVar(&allowExpired, "allow-expired", false, "accept an expired attestation (for audits)")
	verify.Flags().BoolVar(&anyVerdict, "any-verdict", false, "exit 0 for any valid record, whatever its verdict (default: exit 1 unless the verdict is ACCEPTED)")
	verify.Flags().StringVar(&requireSource, "require-source", "", "refuse the attestation unless its challenges came from a source ranked at least this: procedural, corpus, hybrid or llm (default: any source; this flag of verify does not inherit the node's --require-source default; an empty value is refused, leave the flag out for any)")
	// verify reads a file, not the store.
	for _, c := range []*cobra.Command{list, show, export} {
		a.addFlags(c.Flags(), groupStore)
	}
	cmd.AddCommand(list, show, export, verify)
	return cmd
}

// checkExportTarget refuses an export --out that names an existing
// regular file holding something else than an attestation: the store, its
// write-ahead log and the node's key sit in one directory, and writing
// the envelope over one of them lost every record or the identity. An
// earlier export (in any form verify reads) and an empty file may be
// written over; a device or a pipe (/dev/stdout) is written to.
func checkExportTarget(path string) error {
	fi, err := os.Stat(path)
	if err == nil && fi.IsDir() {
		// A slip of the flag as the store or the key is (it was exit 1,
		// "open DIR: is a directory").
		return usageErr("--out %s is a directory: give a file name, e.g. %s", path, filepath.Join(path, "peer.att"))
	}
	if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
		// A new file; or one the write will say it cannot open.
		return nil
	}
	data, err := readFileCapped(path, 4*protocol.MaxEnvelopeBytes)
	if err == nil {
		if utf8.Valid(data) {
			if b, derr := mcpserver.DecodeRecord(string(data)); derr == nil {
				data = b
			}
		}
		if _, derr := protocol.DecodeAttestationUnverified(data); derr == nil {
			return nil
		}
	}
	return usageErr("--out %s: the file exists and holds no attestation (a store? a key?): export writes over an earlier export only; give a new file name, or move the file away first", path)
}

// storeFileHolds names what the file at path plainly holds when it is no
// bbolt database: an exported attestation (in any form verify reads), JSON
// or other text. It is "" for anything else: binary data is taken for a
// store whose pages are damaged. A bbolt file is never text: its first
// page opens with eight zero bytes.
func storeFileHolds(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	head, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil || len(head) == 0 {
		return ""
	}
	if len(head) <= 4*protocol.MaxEnvelopeBytes {
		data := head
		if utf8.Valid(data) {
			if b, derr := mcpserver.DecodeRecord(string(data)); derr == nil {
				data = b
			}
		}
		if _, derr := protocol.DecodeAttestationUnverified(data); derr == nil {
			return "an attestation (an export)"
		}
	}
	text := head
	if len(head) == 64<<10 {
		// A rune may be cut at the end of what was read.
		text = head[:len(head)-utf8.UTFMax]
	}
	if bytes.IndexByte(text, 0) >= 0 || !utf8.Valid(text) {
		return ""
	}
	if t := bytes.TrimLeft(text, " \t\r\n\ufeff"); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		return "JSON (a challenge set? a report?)"
	}
	return "text"
}

// storedEntry reads one entry from the store (opened read and closed again).
func (a *app) storedEntry(key string) (*peer.Entry, error) {
	st, err := a.openExistingStore(recordLockedHint)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	// A store that cannot be read is a runtime failure; a KEY it does not
	// hold is a usage error. Get verifies only the record it returns (a
	// full listing first verified every record the store holds, twice).
	e, err := st.Get(key)
	switch {
	case errors.Is(err, peer.ErrNoAttestation):
		return nil, usageErr("no attestation with key %s (KEY as printed by acaptcha attestations list)", key)
	case err != nil:
		return nil, fmt.Errorf("read store %s: %w", a.storePath, err)
	}
	return e, nil
}

// openExistingStore opens the store for a command that only reads it:
// a store file that does not exist is a usage error naming the path (a
// mistyped --store would otherwise create an empty database and report
// "no attestations"). node and attest create the store; this does not.
// lockedHint says what to do when a running node holds it.
func (a *app) openExistingStore(lockedHint string) (*peer.Store, error) {
	if err := a.checkStoreExists(); err != nil {
		return nil, err
	}
	st, err := peer.OpenStoreReadOnly(a.storePath)
	if err != nil {
		return nil, storeOpenErr(a.storePath, err, lockedHint)
	}
	return st, nil
}

// storeOpenErr reports a store that would not open: a runtime failure
// (exit 1), whether another process (a running node) holds it or the file
// is corrupt or unreadable; hint says what to do about a held store.
func storeOpenErr(path string, err error, hint string) error {
	if errors.Is(err, peer.ErrStoreCorrupt) {
		// A --store that names an exported attestation, a challenge set
		// or another text file was called damaged, "move it aside to
		// start afresh" (exit 1): it is a slip of the flag, as a key
		// file is (the file is not touched).
		if what := storeFileHolds(path); what != "" {
			return usageErr("--store %s holds %s, not a store: check --store; the file is left as it is", path, what)
		}
	}
	if !strings.Contains(err.Error(), path) {
		err = fmt.Errorf("store %s: %w", path, err)
	}
	if errors.Is(err, peer.ErrStoreLocked) && hint != "" {
		return fmt.Errorf("%w; %s", err, hint)
	}
	return err
}

// What to do when a running node holds the store: attestations show and
// export need the store itself (nothing else serves a stored record);
// list can also be had, as the verdicts behind each peer, from peers
// --node.
const (
	recordLockedHint = "stop the node first (a clean stop leaves every record in the store), then run this again"
	listLockedHint   = recordLockedHint + "; while it runs, acaptcha peers --node ADDR shows each peer with the attestations behind it (the node started with --metrics ADDR)"
)

// checkStoreExists refuses a --store path with no file behind it.
func (a *app) checkStoreExists() error {
	fi, err := os.Stat(a.storePath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return usageErr("store %s does not exist (check --store; acaptcha node and attest create it)", a.storePath)
	case err != nil:
		return fmt.Errorf("store %s: %w", a.storePath, err)
	case fi.IsDir():
		return usageErr("store %s is a directory, not a store file (check --store)", a.storePath)
	}
	return nil
}

// decodePeerFlag parses the peer ID given to flag, or says what a peer
// ID looks like (the decoder's own "invalid cid: expected 1 as the cid
// version number, got: 113" does not).
func decodePeerFlag(flag, s string) (lpeer.ID, error) {
	id, err := lpeer.Decode(s)
	if err != nil {
		return "", usageErr("%s %q is not a peer ID (want one as acaptcha prints them, 12D3KooW... or Qm...): %v", flag, s, err)
	}
	return id, nil
}

func shortKey(k string) string {
	if len(k) > 16 {
		return k[len(k)-16:]
	}
	return k
}

// stdinHint is what verify - says when standard input is a terminal.
const stdinHint = "reading a record from standard input (paste the envelope in hex or base64, or its JSON); end with Ctrl-D"

// notAcceptedCode is verify's error_code for a valid record whose verdict
// is not an acceptance, as the HTTP door (spec/http.md §4.6) and the MCP
// tool name it.
const notAcceptedCode = "not_accepted"

// printAttestation prints a valid attestation; dir is its direction in
// the store ("" for a file), extra more members of the JSON object.
func (a *app) printAttestation(at *protocol.Attestation, env []byte, dir string, extra map[string]any) error {
	if a.jsonOut {
		out := map[string]any{"valid": true, "accepted": at.Accepted, "attestation": at, "envelope_hex": hex.EncodeToString(env)}
		if dir != "" {
			out["direction"] = dir
		}
		for k, v := range extra {
			out[k] = v
		}
		return writeJSON(a, out)
	}
	w := a.stdout
	fmt.Fprintf(w, "issuer   %s\nsubject  %s\nverdict  %s (%s)", at.Issuer, at.Subject, verdictWord(at.Accepted, at.Reason), at.Reason)
	if at.FailedRound > 0 {
		fmt.Fprintf(w, " at round %d", at.FailedRound)
	}
	fmt.Fprintf(w, "\nissued   %s\nexpires  %s\nspec     %s\ndomain   %s (set %s)\nsource   %s\nnonce    %x\ndigest   %x\n",
		at.IssuedAt.Format(time.RFC3339), at.ExpiresAt.Format(time.RFC3339), at.SpecVersion, at.ChallengeDomain, at.SetID, provenanceWords(at.Provenance), at.Nonce, at.TranscriptDigest)
	p := at.Policy
	tau := p.Tau.String()
	if p.DerivedTau {
		tau = fmt.Sprintf("derived (alpha %.2g)", p.Alpha)
	}
	fmt.Fprintf(w, "policy   %d rounds, tau %s, total %s, rtt credit cap %s\n", p.Rounds, tau, p.Total, p.RTTCredit)
	for _, r := range at.Rounds {
		fmt.Fprintf(w, "  round %d  effective %s / budget %s  narrative %d tokens  correct %v\n", r.Round, r.Effective, r.Budget, r.NarrativeTokens, r.Correct)
	}
	return nil
}

// provenanceWords describes an attestation's challenge provenance for
// people, with what it is worth against a script.
func provenanceWords(pv skill.Provenance) string {
	k := pv.Source
	out := fmt.Sprintf("%s (rank %d)", protocol.SourceName(k), k.Rank())
	if pv.Model != "" {
		out += ", model " + pv.Model
	}
	if pv.LLMQuestions {
		out += ", questions LLM-worded"
	} else if k.Valid() {
		out += ", questions not LLM-worded"
	}
	switch k {
	case skill.SourceProcedural:
		out += "; a script written against this code passes procedural challenges"
	case skill.SourceCorpus:
		out += "; corpus sets can be pre-solved by anyone holding the files"
	case skill.SourceUnknown:
		out += "; the record names no source"
	default:
		if !k.Valid() {
			out += "; not a source kind this version knows"
		}
	}
	return out
}

func writeJSON(a *app, v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

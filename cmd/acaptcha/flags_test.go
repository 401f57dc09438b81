package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/acaptcha/acaptcha/skill"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Numeric flags outside their range are refused with a usage error
// instead of being accepted silently.
func TestNumericFlagsRefused(t *testing.T) {
	for _, args := range [][]string{
		{"node", "--max-serves", "-1"},
		{"node", "--max-serves", "0"},
		{"node", "--pool-workers", "0"},
		{"node", "--pool-size", "0"},
		{"node", "--pool-wait", "0s"},
		{"node", "--pool-wait", "31s"}, // past the session's wait for its set
		{"node", "--pool-token-budget", "-5"},
		{"node", "--trust-quorum", "-1"},
		{"node", "--keep-expired", "-1h"},
	} {
		var out, errb bytes.Buffer
		if code := Main(context.Background(), args, &out, &errb); code != exitUsage {
			t.Errorf("%v: exit %d, want %d (stderr %q)", args, code, exitUsage, errb.String())
		}
		if !strings.Contains(errb.String(), args[1]) {
			t.Errorf("%v: error does not name the flag: %q", args, errb.String())
		}
	}
}

// --http-trusted-proxy: bad values and a use without --http are usage
// errors, before the node starts; good values are read as networks.
func TestTrustedProxyFlag(t *testing.T) {
	for _, args := range [][]string{
		{"node", "--http", "127.0.0.1:0", "--http-trusted-proxy", "proxy.example"},
		{"node", "--http", "127.0.0.1:0", "--http-trusted-proxy", "10.0.0.0/33"},
		{"node", "--http", "127.0.0.1:0", "--http-trusted-proxy", "10.0.0.1,"},
		{"node", "--http-trusted-proxy", "10.0.0.1"},
	} {
		var out, errb bytes.Buffer
		if code := Main(context.Background(), args, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), "--http-trusted-proxy") {
			t.Errorf("%v: exit %d, want %d with an error naming the flag (stderr %q)", args, code, exitUsage, errb.String())
		}
	}
	got, err := parseTrustedProxies([]string{"10.1.2.3", "192.168.0.0/16, fd00::1/8", "::ffff:172.16.0.0/108", "::1"}, "127.0.0.1:0")
	want := []netip.Prefix{
		netip.MustParsePrefix("10.1.2.3/32"), netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("fd00::/8"),
		netip.MustParsePrefix("172.16.0.0/12"), netip.MustParsePrefix("::1/128"),
	}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("parseTrustedProxies = %v, %v; want %v", got, err, want)
	}
}

// Under --json, errors are a JSON object with the exit code.
func TestJSONErrors(t *testing.T) {
	for _, args := range [][]string{
		{"attest", "--json"},                     // cobra's own argument error
		{"--json", "node", "--max-serves", "-1"}, // our usage error
		{"--json", "no-such-command"},
	} {
		var out, errb bytes.Buffer
		code := Main(context.Background(), args, &out, &errb)
		var e struct {
			Error    string `json:"error"`
			ExitCode int    `json:"exit_code"`
		}
		if err := json.Unmarshal(errb.Bytes(), &e); err != nil {
			t.Fatalf("%v: stderr is not JSON: %q", args, errb.String())
		}
		if e.Error == "" || e.ExitCode != code || code != exitUsage {
			t.Errorf("%v: %+v, exit %d", args, e, code)
		}
	}
}

func TestVersionCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"version", "--json"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var v versionInfo
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || v.Version == "" || !strings.HasPrefix(v.GoVersion, "go") {
		t.Fatalf("version %+v (%v)", v, err)
	}
}

// Every command resolves --challenges and eval's --source through one
// registry (sources.go): each name maps to its kind, bad values fail with
// the list of names.
func TestChallengeSourceRegistry(t *testing.T) {
	for v, want := range map[string]skill.SourceKind{
		"auto": skill.SourceProcedural, "procedural": skill.SourceProcedural,
		"examples": skill.SourceCorpus, "corpus:/x": skill.SourceCorpus,
		"llm": skill.SourceLLM, "hybrid": skill.SourceHybrid,
	} {
		if got := challengeKind(v); got != want {
			t.Errorf("challengeKind(%q) = %v, want %v", v, got, want)
		}
		if k, err := evalKind(v); err != nil || k != want {
			t.Errorf("evalKind(%q) = %v, %v", v, k, err)
		}
	}
	for _, bad := range []string{"corpus", "corpus:", "llm:x", "gpt", ""} {
		_, _, err := lookupChallenges(bad)
		if err == nil {
			t.Errorf("lookupChallenges(%q) accepted", bad)
			continue
		}
		if !strings.Contains(err.Error(), "corpus:DIR") && !strings.Contains(err.Error(), "argument") {
			t.Errorf("lookupChallenges(%q): %v does not say what is accepted", bad, err)
		}
	}
	if !evalValidateDefault("examples") || !evalValidateDefault("corpus:d") || evalValidateDefault("procedural") || evalValidateDefault("hybrid") {
		t.Error("eval validates by default exactly the static corpora")
	}
}

// A command's help lists the flags it reads and not the node's (issue
// 12: every global node flag showed on every subcommand's help).
func TestHelpListsOnlyTheCommandsFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    []string
		notWant []string
	}{
		{[]string{"version", "--help"}, []string{"--json"}, []string{"--listen", "--llm", "--store", "--pool-size"}},
		{[]string{"attestations", "list", "--help"}, []string{"--store", "--json"}, []string{"--listen", "--llm", "--tau", "--pool-size"}},
		{[]string{"peers", "--help"}, []string{"--store", "--require-source"}, []string{"--listen", "--llm", "--pool-size"}},
		{[]string{"eval", "--help"}, []string{"--tau", "--llm"}, []string{"--listen", "--store", "--key"}},
		{[]string{"node", "--help"}, []string{"--listen", "--llm", "--store", "--key", "--challenges", "--pool-size", "--nat", "--trust-quorum"}, nil},
		{[]string{"attest", "--help"}, []string{"--listen", "--llm", "--store", "--key"}, nil},
	} {
		var out, errb bytes.Buffer
		if code := Main(context.Background(), tc.args, &out, &errb); code != exitOK {
			t.Errorf("%v: exit %d: %s", tc.args, code, errb.String())
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%v help lacks %s", tc.args, w)
			}
		}
		for _, w := range tc.notWant {
			if strings.Contains(out.String(), w+" ") {
				t.Errorf("%v help lists %s, which the command does not read", tc.args, w)
			}
		}
	}
}

// A flag's help names only flags its own command takes: eval's
// --pool-size and --pool-workers said "(--challenges llm or hybrid)",
// and eval has no --challenges (its pools come from --source). A flag of
// another command is named with that command ("the node's --metrics").
func TestFlagUsageNamesOnlyItsCommandsFlags(t *testing.T) {
	otherCommands := map[string]bool{"acaptcha peers --node mentions --metrics": true}
	mention := regexp.MustCompile(`--([a-z][a-z0-9-]*[a-z0-9])`)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			for _, m := range mention.FindAllStringSubmatch(f.Usage, -1) {
				if c.Flags().Lookup(m[1]) != nil || c.InheritedFlags().Lookup(m[1]) != nil {
					continue
				}
				if key := c.CommandPath() + " --" + f.Name + " mentions --" + m[1]; !otherCommands[key] {
					t.Errorf("%s: --%s's help names --%s, which %s does not take: %q", c.CommandPath(), f.Name, m[1], c.CommandPath(), f.Usage)
				}
			}
		})
		// Only --json and --log-level are global: mcp's help said it
		// "starts a node from the global flags", which its help then
		// lists as its own.
		if strings.Contains(c.Long, "global flags") {
			t.Errorf("%s --help speaks of the global flags for its own: %q", c.CommandPath(), c.Long)
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk((&app{stdout: io.Discard, stderr: io.Discard}).rootCmd())
}

// A port out of range on --http or --metrics is a usage error (exit 2)
// before the node starts, like one on --listen.
func TestListenPortRange(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"node", "--http", "127.0.0.1:99999"},
		{"node", "--metrics", "127.0.0.1:99999"},
		{"node", "--metrics", "127.0.0.1:-1"},
	} {
		args = append(args, "--key", filepath.Join(dir, "key"), "--store", filepath.Join(dir, "db"), "--listen", "/ip4/127.0.0.1/tcp/0")
		var out, errb bytes.Buffer
		if code := Main(context.Background(), args, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), args[1]) {
			t.Errorf("%v: exit %d, want %d naming the flag (stderr %q)", args, code, exitUsage, errb.String())
		}
	}
}

// A key file that is not a key is refused with a message that says what
// the file is, before any store is created.
func TestBadKeyFileNoStore(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		data []byte
		want string
	}{"garbage": {[]byte("not a key\n"), "is not a libp2p private key"}, "empty": {nil, "is empty"}} {
		key, store := filepath.Join(dir, name+".key"), filepath.Join(dir, name+".db")
		if err := os.WriteFile(key, tc.data, 0o600); err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		code := Main(context.Background(), []string{"node", "--key", key, "--store", store, "--listen", "/ip4/127.0.0.1/tcp/0"}, &out, &errb)
		if code != exitFailure || !strings.Contains(errb.String(), "key file "+key+" "+tc.want) {
			t.Errorf("%s key: exit %d, stderr %q", name, code, errb.String())
		}
		if _, err := os.Stat(store); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s key: store %s left behind (%v)", name, store, err)
		}
	}
}

// A bad log level from the environment names the variable, one from the
// flag names the flag.
func TestLogLevelErrorNamesItsSource(t *testing.T) {
	t.Setenv("ACAPTCHA_LOG_LEVEL", "bogus")
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"version"}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), "ACAPTCHA_LOG_LEVEL") {
		t.Errorf("env: exit %d, stderr %q", code, errb.String())
	}
	errb.Reset()
	if code := Main(context.Background(), []string{"--log-level", "loud", "version"}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), "--log-level \"loud\"") {
		t.Errorf("flag: exit %d, stderr %q", code, errb.String())
	}
}

// demo keeps --challenges auto on procedural with --llm (only node,
// attest and mcp turn it into llm): its help said "auto picks llm with
// --llm", and `demo --llm` then served procedural challenges.
func TestDemoChallengesHelpSaysAutoIsProcedural(t *testing.T) {
	out, _, code := runMain(t, "demo", "--help")
	if code != exitOK || strings.Contains(out, "auto picks llm") || !strings.Contains(out, "auto is procedural, with or without --llm") {
		t.Errorf("demo --help: exit %d\n%s", code, out)
	}
	out, _, _ = runMain(t, "node", "--help")
	if !strings.Contains(out, "auto picks llm with --llm") {
		t.Errorf("node --help lost its auto rule:\n%s", out)
	}
}

// node --challenges llm without --llm names the flag the user gave: the
// error spoke of "--source llm", generate's and eval's flag only.
func TestLLMChallengesWithoutLLMNameTheFlag(t *testing.T) {
	dir := t.TempDir()
	_, errOut, code := runMain(t, "node", "--challenges", "llm", "--listen", "/ip4/127.0.0.1/tcp/0", "--store", filepath.Join(dir, "db"), "--key", filepath.Join(dir, "key"))
	if code != exitUsage || !strings.Contains(errOut, "--challenges") {
		t.Errorf("exit %d\n%s", code, errOut)
	}
}

// A wrong argument count names the command and what it wants, not
// cobra's "accepts 1 arg(s), received 0".
func TestArgCountErrorsNameTheArgument(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"attest"}, []string{"acaptcha attest: missing MULTIADDR", "usage: acaptcha attest MULTIADDR"}},
		{[]string{"challenge", "inspect", "--json"}, []string{"acaptcha challenge inspect: missing FILE"}},
		{[]string{"attestations", "verify", "my", "file.att"}, []string{"takes one argument, FILE, got 2", `"my", "file.att"`, "quote a path with spaces"}},
		{[]string{"attestations", "show"}, []string{"missing KEY"}},
	} {
		out, errOut, code := newUserMain(context.Background(), tc.args...)
		if code != exitUsage || out != "" {
			t.Errorf("%v: exit %d, stdout %q", tc.args, code, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%v: stderr %q lacks %q", tc.args, errOut, w)
			}
		}
		if strings.Contains(errOut, "arg(s)") {
			t.Errorf("%v: cobra's wording: %q", tc.args, errOut)
		}
	}
}

// A group command called alone with --json prints JSON, not its help
// text: standard output stays machine-readable.
func TestGroupAloneJSON(t *testing.T) {
	for _, args := range [][]string{{"bench", "--json"}, {"--json", "attestations"}, {"challenge", "--json"}, {"--json"}} {
		out, errOut, code := newUserMain(context.Background(), args...)
		var g struct {
			Command  string `json:"command"`
			Commands []struct {
				Name string `json:"name"`
				Use  string `json:"use"`
			} `json:"commands"`
		}
		if err := json.Unmarshal([]byte(out), &g); err != nil || code != exitOK || errOut != "" {
			t.Fatalf("%v: exit %d, stdout %q (%v), stderr %q", args, code, out, err, errOut)
		}
		if !strings.HasPrefix(g.Command, "acaptcha") || len(g.Commands) == 0 || !strings.HasPrefix(g.Commands[0].Use, g.Command+" ") {
			t.Errorf("%v: %+v", args, g)
		}
	}
	// Without --json it is still the help text.
	if out, _, code := newUserMain(context.Background(), "bench"); code != exitOK || !strings.Contains(out, "Available Commands:") {
		t.Errorf("bench alone: exit %d, %q", code, out)
	}
}

// --help --json and help CMD --json print the help as one JSON object
// (the command, its usage, subcommands and flags with their variables),
// as every output under --json; before, both printed the help text.
func TestHelpJSON(t *testing.T) {
	for _, args := range [][]string{{"--help", "--json"}, {"help", "attest", "--json"}, {"attest", "--help", "--json"}, {"--json", "attestations", "list", "-h"}, {"help", "--json"}} {
		out, errOut, code := newUserMain(context.Background(), args...)
		var h struct {
			Command string `json:"command"`
			Use     string `json:"use"`
			Flags   []struct {
				Name, Env string
			} `json:"flags"`
			GlobalFlags []struct {
				Name, Env string
			} `json:"global_flags"`
			Commands []struct{ Name string } `json:"commands"`
		}
		if err := json.Unmarshal([]byte(out), &h); err != nil || code != exitOK || errOut != "" {
			t.Fatalf("%v: exit %d, stdout %q (%v), stderr %q", args, code, out, err, errOut)
		}
		json := false
		for _, f := range append(h.GlobalFlags, h.Flags...) {
			json = json || f.Name == "json"
		}
		if !strings.HasPrefix(h.Use, h.Command) || !json {
			t.Errorf("%v: %+v", args, h)
		}
		switch h.Command {
		case "acaptcha":
			if len(h.Commands) == 0 {
				t.Errorf("%v: no commands: %+v", args, h)
			}
		case "acaptcha attest":
			found := false
			for _, f := range h.Flags {
				found = found || f.Name == "llm" && f.Env == "ACAPTCHA_LLM"
			}
			if !found {
				t.Errorf("%v: no --llm flag with its variable: %+v", args, h.Flags)
			}
		case "acaptcha attestations list":
		default:
			t.Errorf("%v: command %q", args, h.Command)
		}
	}
	if out, _, code := newUserMain(context.Background(), "help", "attest"); code != exitOK || !strings.Contains(out, "Usage:") {
		t.Errorf("help attest without --json: exit %d, %q", code, out)
	}
}

// An error about a value the user set through its ACAPTCHA_ variable
// names the variable, not a flag they never typed: ACAPTCHA_LLM=bogus
// was "LLM bogus" (node, generate) or "--llm bogus" (demo, eval), and
// ACAPTCHA_REQUIRE_SOURCE=zz "--require-source: ...". A flag given on
// the command line is named as a flag, even with its variable set.
func TestErrorsNameTheEnvironmentVariable(t *testing.T) {
	dir := t.TempDir()
	store := []string{"--store", filepath.Join(dir, "db"), "--key", filepath.Join(dir, "key")}
	for _, c := range []struct {
		env, val string
		args     []string
		want     string
	}{
		{"ACAPTCHA_LLM", "bogus", append([]string{"node"}, store...), "ACAPTCHA_LLM=bogus: "},
		{"ACAPTCHA_LLM", "bogus", []string{"demo"}, "ACAPTCHA_LLM=bogus: "},
		{"ACAPTCHA_LLM", "bogus", []string{"generate", "--out", dir}, "ACAPTCHA_LLM=bogus: "},
		{"ACAPTCHA_LLM", "bogus", []string{"eval", "--sessions", "1"}, "ACAPTCHA_LLM=bogus: "},
		{"ACAPTCHA_REQUIRE_SOURCE", "zz", []string{"peers", "--store", filepath.Join(dir, "db")}, "ACAPTCHA_REQUIRE_SOURCE: unknown"},
		{"ACAPTCHA_POOL_WAIT", "1m", []string{"demo"}, "ACAPTCHA_POOL_WAIT=1m: at most"},
		{"ACAPTCHA_MAX_DRAWS", "5", append([]string{"node", "--max-draws-per-peer", "10"}, store...), "--max-draws-per-peer 10 exceeds ACAPTCHA_MAX_DRAWS=5"},
		{"ACAPTCHA_TAU", "1h", []string{"demo"}, "shorter than one round's tau 1h0m0s (set by ACAPTCHA_TAU=1h)"},
	} {
		t.Run(c.env+"/"+c.args[0], func(t *testing.T) {
			t.Setenv(c.env, c.val)
			_, errOut, code := newUserMain(context.Background(), c.args...)
			if code != exitUsage || !strings.Contains(errOut, c.want) {
				t.Errorf("%s=%s acaptcha %v: exit %d, stderr %q, want %q", c.env, c.val, c.args, code, errOut, c.want)
			}
		})
	}
	// The command line wins and is named as such.
	t.Setenv("ACAPTCHA_LLM", "openai:m")
	if _, errOut, code := newUserMain(context.Background(), "demo", "--llm", "bogus"); code != exitUsage || !strings.Contains(errOut, "--llm bogus: ") {
		t.Errorf("--llm bogus with ACAPTCHA_LLM set: exit %d, stderr %q", code, errOut)
	}
}

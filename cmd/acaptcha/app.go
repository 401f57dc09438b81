package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/acaptcha/acaptcha/internal/liblog"
	"github.com/acaptcha/acaptcha/llm"
	"github.com/acaptcha/acaptcha/protocol"

	"github.com/acaptcha/acaptcha/peer"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/pool"
	"github.com/acaptcha/acaptcha/skill/solve"
)

// Exit codes (README, "Exit codes"). Exit 2 is for usage errors only:
// every error that means "the command line is wrong" is tagged with
// usageErr (cobra's own flag and argument errors included, see
// tagUsageErrors); any other error is a runtime failure and exits 1.
const (
	exitOK       = 0
	exitRejected = 1 // a verdict or check that failed, or a runtime failure
	exitFailure  = 1 // a runtime failure (untagged errors)
	exitUsage    = 2
	exitNetwork  = 3
	// exitInterrupted: SIGINT or SIGTERM stopped a command before it
	// finished (128 + SIGINT, as shells report it). node and mcp run
	// until stopped: a signal is their normal end, exit 0.
	exitInterrupted = 130
)

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
	// shown: the command already reported the outcome on standard output
	// (a verdict, a failed check); Main prints nothing more.
	shown bool
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(format string, a ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, a...)}
}

// verdictErr is exit 1 for an outcome the command has already printed on
// standard output (not accepted, rejected, a failed --check).
func verdictErr(err error) error {
	return &exitError{code: exitRejected, err: err, shown: true}
}

// annotServe marks the commands that run until stopped (node, mcp): a
// signal ends them normally.
const annotServe = "acaptcha/serve"

// app holds the global options shared by the commands.
type app struct {
	stdout, stderr io.Writer
	// stdin is what "-" reads (attestations verify -): os.Stdin, or a
	// test's reader (stdinReader).
	stdin io.Reader

	llmSpec    string
	llmBaseURL string
	// answerTokens caps the output tokens of each answer the LLM writes
	// as prover (--answer-max-tokens).
	answerTokens int
	challenges   string
	keyFile      string
	storePath    string
	listen       []string
	nat          natOptions
	tau          time.Duration
	deriveTau    bool
	total        time.Duration
	rounds       int
	maxServes    int
	jsonOut      bool
	logLevel     string
	gen          genOptions
	// guard watches the started node's LLM answerer (startNode); nil
	// without --llm.
	guard *skill.GuardedProver

	// Trust, sharing and operations (startNode; peers.go).
	trustQuorum   int
	requireSource string
	gossip        bool
	blockRejected time.Duration
	metricsAddr   string
	metricsURL    string // where serveOps listens (the bound address; loopback for all interfaces)
	corpusUsedUp  bool   // the --challenges corpus has no serve left (sources.go)
	metricsAll    bool   // serveOps listens on every interface

	// First contact and discovery: flags of the node command only. The
	// flag package assigns their defaults when the node command is built,
	// whichever command runs, so startNode reads them only when the
	// caller passes them (a one-shot attest must neither challenge other
	// peers by itself nor announce itself by mDNS).
	contact contactOptions

	// agentProver, when set (acaptcha mcp --answer-with agent; mcp.go),
	// replaces the LLM as the node's prover: the MCP client answers.
	agentProver skill.Prover

	log *slog.Logger
	// fromEnv names the flags of the running command whose value came
	// from their ACAPTCHA_ variable (bindEnv): errors name the variable.
	fromEnv map[string]bool
	// warned: the sources checkFeasible has warned about (sources.go).
	warned map[string]bool
	// corpusSets: the sets of each corpus:DIR read (loadCorpusDir).
	corpusSets map[string][]*skill.Set
}

// Main runs the CLI with args and returns the process exit code.
//
// Results go to standard output; errors to standard error, as one line
// "error: ..." or, under --json, as one JSON object {"error", "exit_code"}
// (README, "Exit codes"). A command that printed its outcome (a verdict,
// a failed check) on standard output exits 1 without an error object.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if ctx == nil {
		ctx = context.Background()
	}
	a := &app{stdout: stdout, stderr: stderr, stdin: stdinReader}
	root := a.rootCmd()
	if args == nil {
		// cobra reads os.Args[1:] when its args are nil: Main(ctx, nil)
		// would run the process's own arguments (a test binary's
		// -test.timeout 20m became `unknown command "20m"`).
		args = []string{}
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if a.guard != nil {
		a.guard.Close() // a canary under way (the node has stopped)
	}
	if a.gen.stopPools != nil {
		// The generation pools of attest and mcp (node stopped its own
		// after draining): their workers log, so they end before the
		// command's last words.
		a.gen.stopPools()
	}
	// Under --json an error is a JSON object on stderr too (the flag may
	// not have been parsed when cobra itself refused the arguments).
	jsonErr := a.jsonOut || jsonRequested(args)
	report := func(code int, e error) int {
		// A value the user set through ACAPTCHA_<FLAG> is named as that
		// variable, not as a flag they never typed.
		msg := oneLine(a.envNamed(cmd, e.Error()))
		if jsonErr {
			_ = json.NewEncoder(stderr).Encode(struct {
				Error    string `json:"error"`
				ExitCode int    `json:"exit_code"`
			}{msg, code})
		} else {
			fmt.Fprintln(stderr, "error:", msg)
		}
		return code
	}
	var ee *exitError
	if ctx.Err() != nil && err != nil && !(errors.As(err, &ee) && ee.code == exitUsage) && (cmd == nil || cmd.Annotations[annotServe] == "") {
		// Stopped by a signal before it finished: whatever it printed is
		// partial, and no outcome it reached counts (a shortfall such as
		// "6 of 100000 sets" is the signal's doing). A command that
		// finished (nil) before the signal, or whose arguments were
		// refused, keeps its own exit status.
		return report(exitInterrupted, fmt.Errorf("interrupted before %s finished: any output above is partial", commandName(cmd)))
	}
	if err == nil {
		return exitOK
	}
	if errors.As(err, &ee) {
		if ee.shown || ee.err == nil {
			return ee.code
		}
		return report(ee.code, err)
	}
	// Anything not tagged as a usage error is a runtime failure.
	return report(exitFailure, err)
}

// envNamed rewrites, in an error message of cmd, each flag the user set
// only through its environment variable (bindEnv, a.fromEnv) as that
// variable:
// "--llm bogus: ..." becomes "ACAPTCHA_LLM=bogus: ...", a bare "--llm"
// becomes "ACAPTCHA_LLM". A flag given on the command line is left as
// it is (it wins over the variable).
func (a *app) envNamed(cmd *cobra.Command, msg string) string {
	if cmd == nil || len(a.fromEnv) == 0 {
		return msg
	}
	cmd.Flags().VisitAll(func(fl *pflag.Flag) {
		if fl.Changed || !a.fromEnv[fl.Name] {
			return
		}
		name := flagEnv(fl)
		v, ok := os.LookupEnv(name)
		if !ok {
			return
		}
		shown := v
		if shown == "" || strings.ContainsAny(shown, " \t\"") {
			shown = strconv.Quote(v)
		}
		flag := "--" + fl.Name
		if val := fl.Value.String(); val != "" {
			msg = replaceToken(msg, flag+" "+strconv.Quote(val), name+"="+shown)
			msg = replaceToken(msg, flag+" "+val, name+"="+shown)
		}
		msg = replaceToken(msg, flag, name)
	})
	return msg
}

// replaceToken replaces in s every old that neither a flag-name
// character precedes nor follows ("--llm" is not in "--llm-base-url").
func replaceToken(s, old, repl string) string {
	word := func(b byte) bool {
		return b == '-' || b == '_' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9'
	}
	var out strings.Builder
	for {
		i := strings.Index(s, old)
		if i < 0 {
			out.WriteString(s)
			return out.String()
		}
		end := i + len(old)
		if (i > 0 && word(s[i-1])) || (end < len(s) && word(s[end]) && word(old[len(old)-1])) {
			out.WriteString(s[:end])
			s = s[end:]
			continue
		}
		out.WriteString(s[:i])
		out.WriteString(repl)
		s = s[end:]
	}
}

func commandName(cmd *cobra.Command) string {
	if cmd == nil {
		return "the command"
	}
	return cmd.CommandPath()
}

// samePath says a and b name one file: the same path once absolute, or
// one existing file.
func samePath(a, b string) bool {
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	if err1 == nil && err2 == nil && aa == bb {
		return true
	}
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

// holdsPrivateKey says path is a small regular file holding a libp2p
// private key, as --key's file does (a store is never one).
func holdsPrivateKey(path string) bool {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 || fi.Size() > 16<<10 {
		return false
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	_, err = crypto.UnmarshalPrivateKey(data)
	return err == nil
}

// isDir says path names a directory.
func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// offFlags are the flags whose default is off: none or off (any case),
// on the command line or in their variable, turns them off, and the
// value names what they take otherwise.
var offFlags = map[string]string{
	"llm":             "PROVIDER:MODEL, or none for no LLM",
	"cross-check-llm": "PROVIDER:MODEL, or none for no cross-check",
	"http":            "HOST:PORT, or off",
	"metrics":         "HOST:PORT, or off",
}

// ownEmptyCheck are the flags whose command refuses an empty value itself,
// with a message that says what the flag takes.
var ownEmptyCheck = map[string]bool{
	"store": true, "key": true, "require-source": true, "attest-policy": true,
	"node": true, "challenges": true,
}

// isOffWord says v is how a flag of offFlags is turned off explicitly.
func isOffWord(v string) bool {
	v = strings.TrimSpace(v)
	return strings.EqualFold(v, "none") || strings.EqualFold(v, "off")
}

// checkEmptyFlags refuses a flag given an empty (or blank) value on the
// command line, whatever the flag: it is most often an unset shell
// variable (--llm "$MODEL", verify --subject "$PEER"), and taken as the
// default it turned an LLM, the HTTP door or metrics off, or a check
// (--subject, --issuer) off, without a word, while --store "" or
// --challenges "" were refused. A flag whose default is off is turned off
// with none or off (offFlags), which this maps to its off value. A value
// from an ACAPTCHA_ variable is not checked here: an empty variable is
// refused where the flag's value is (--store, --challenges) and otherwise
// stands for the default.
func checkEmptyFlags(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(fl *pflag.Flag) {
		if err != nil {
			return
		}
		if _, ok := offFlags[fl.Name]; ok && isOffWord(fl.Value.String()) {
			err = fl.Value.Set("")
			return
		}
		if !fl.Changed || ownEmptyCheck[fl.Name] {
			return
		}
		var vals []string
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			vals = sv.GetSlice()
			if len(vals) == 0 {
				vals = []string{""} // --attacks "": a list of none
			}
		} else if fl.Value.Type() == "string" {
			vals = []string{fl.Value.String()}
		}
		for _, v := range vals {
			if strings.TrimSpace(v) != "" {
				continue
			}
			want, ok := offFlags[fl.Name]
			switch {
			case ok:
				want = "want " + want + " (leaving the flag out is off too)"
			case fl.DefValue != "" && fl.DefValue != "[]":
				want = fmt.Sprintf("give a value, or leave the flag out for the default, %s", fl.DefValue)
			default:
				want = "give a value, or leave the flag out"
			}
			err = usageErr("--%s is empty (an unset shell variable?): %s; see --help", fl.Name, want)
			return
		}
	})
	return err
}

// maxTrustQuorum is the largest --trust-quorum: the hard cap of a node's
// learned-attestation index (peer/trust.go: twice peer.MaxLearned, the
// records of directly admitted issuers included), so no larger quorum of
// distinct issuers can ever be counted.
const maxTrustQuorum = 2 * peer.MaxLearned

// checkNumbers refuses numeric flags outside their meaningful range
// instead of accepting them silently. Only the flags of the command that
// runs (fs) are checked.
func (a *app) checkNumbers(fs *pflag.FlagSet) error {
	if err := checkEmptyFlags(fs); err != nil {
		return err
	}
	has := func(name string) bool { return fs.Lookup(name) != nil }
	// A choice given empty (an unset shell variable: --require-source
	// "$MIN") was taken for the default without a word, where an empty
	// --challenges or --store is refused. (attestations verify's
	// --require-source, whose default is empty, refuses it itself.)
	for _, c := range []struct{ name, want string }{
		{"require-source", "procedural, corpus, hybrid, llm or any"},
		{"attest-policy", "all, inbound, outbound or none"},
	} {
		if fl := fs.Lookup(c.name); fl != nil && fl.Changed && fl.DefValue != "" && strings.TrimSpace(fl.Value.String()) == "" {
			return usageErr("--%s is empty: want %s (leave the flag out for the default, %s)", c.name, c.want, fl.DefValue)
		}
	}
	switch {
	case has("store") && strings.TrimSpace(a.storePath) == "":
		// An unset shell variable (--store "$DB"): every command would
		// fail on the path "" with an error that names no flag.
		return usageErr("--store is empty: want the path of the store file (leave the flag out for %s)", fs.Lookup("store").DefValue)
	case has("key") && strings.TrimSpace(a.keyFile) == "":
		return usageErr("--key is empty: want the path of the identity key file (leave the flag out for %s)", fs.Lookup("key").DefValue)
	case has("store") && isDir(a.storePath):
		// Refused before the key is made (node, attest and mcp made
		// one, then failed on the store, exit 1).
		return usageErr("--store %s is a directory, not a store file (check --store: give the path of a file, e.g. %s)", a.storePath, filepath.Join(a.storePath, "acaptcha.db"))
	case has("store") && has("key") && samePath(a.storePath, a.keyFile):
		// The key was made in the file, then the store called it
		// damaged ("move it aside to start afresh": the identity).
		return usageErr("--store and --key name the same file, %s: the store and the identity key are two files (leave one flag out for its default)", a.storePath)
	case has("store") && holdsPrivateKey(a.storePath):
		return usageErr("--store %s holds a libp2p private key (an identity, as --key makes), not a store: check --store; the file is left as it is", a.storePath)
	case has("key") && isDir(a.keyFile):
		return usageErr("--key %s is a directory, not a key file (check --key: give the path of a file, e.g. %s)", a.keyFile, filepath.Join(a.keyFile, "key"))
	case has("max-serves") && a.maxServes < 1:
		return usageErr("--max-serves %d: want at least 1", a.maxServes)
	case has("pool-size") && (a.gen.poolSize < 1 || a.gen.poolSize > pool.MaxSize):
		// Above the pool's cap the error named no flag ("challenge pool:
		// pool: size 100000, want 1..10000"), and only once a pool was
		// built (a procedural node took the value without a word).
		return usageErr("--pool-size %d: want at least 1, at most %d", a.gen.poolSize, pool.MaxSize)
	case has("pool-workers") && a.gen.poolWorkers < 1:
		return usageErr("--pool-workers %d: want at least 1", a.gen.poolWorkers)
	case has("pool-wait") && a.gen.poolWait <= 0:
		return usageErr("--pool-wait %s: want a positive duration", a.gen.poolWait)
	case has("pool-wait") && a.gen.poolWait > protocol.DefaultSourceTimeout:
		// A session waits for its set at most this long (spec/protocol.md
		// §5 step 1), and the peer for round 1 not much longer (§6): a
		// longer pool wait would be cut short without a word.
		return usageErr("--pool-wait %s: at most %s, the longest a session waits for its challenge set", a.gen.poolWait, protocol.DefaultSourceTimeout)
	case has("pool-token-budget") && a.gen.tokenBudget < 0:
		return usageErr("--pool-token-budget %d: want 0 (no cap) or a positive number of tokens per hour", a.gen.tokenBudget)
	case has("trust-quorum") && a.trustQuorum < 0:
		return usageErr("--trust-quorum %d: want 0 (off) or a positive quorum", a.trustQuorum)
	case has("trust-quorum") && a.trustQuorum > maxTrustQuorum:
		return usageErr("--trust-quorum %d: at most %d (a node keeps at most that many learned attestations, so a larger quorum could never be met)", a.trustQuorum, maxTrustQuorum)
	case has("block-rejected") && a.blockRejected < 0:
		return usageErr("--block-rejected %s: want 0 (never) or a positive duration", a.blockRejected)
	case has("answer-max-tokens") && (a.answerTokens < 1 || a.answerTokens > maxAnswerTokens):
		return usageErr("--answer-max-tokens %d: want 1 to %d output tokens per answer", a.answerTokens, maxAnswerTokens)
	case has("cross-check-llm") && a.gen.crossCheck != "" && has("llm") && a.llmSpec == "":
		// The second LLM checks what the first one generated: alone it
		// would be ignored without a word.
		return usageErr("--cross-check-llm %s needs --llm: it cross-checks the sets that --llm generates", a.gen.crossCheck)
	}
	return nil
}

func defaultDataDir() string {
	if d := os.Getenv("ACAPTCHA_HOME"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "acaptcha")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "acaptcha")
	}
	return ".acaptcha"
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "acaptcha",
		Short:         "Agents verifying agents over libp2p with timed, chained comprehension challenges",
		SilenceUsage:  true,
		SilenceErrors: true,
		// --version prints what `acaptcha version` does.
		Version: buildVersion().line(),
		// groupCmd (tagUsageErrors) gives it Args and RunE: alone it
		// prints its help, with an unknown command it is a usage error.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd.Flags()); err != nil {
				return usageErr("%v", err)
			}
			a.fromEnv = map[string]bool{}
			cmd.Flags().VisitAll(func(fl *pflag.Flag) {
				if _, ok := os.LookupEnv(flagEnv(fl)); ok && !fl.Changed {
					a.fromEnv[fl.Name] = true
				}
			})
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(a.logLevel)); err != nil {
				name := "--log-level"
				if fl := cmd.Flags().Lookup("log-level"); fl != nil && !fl.Changed && os.Getenv(envName("log-level")) != "" {
					name = envName("log-level") // the value came from the environment
				}
				return usageErr("%s %q: want debug, info, warn or error: %v", name, a.logLevel, err)
			}
			a.log = slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: lvl}))
			if a.jsonOut {
				a.log = slog.New(slog.NewJSONHandler(a.stderr, &slog.HandlerOptions{Level: lvl}))
			}
			// go-libp2p, the DHT and GossipSub log through this handler
			// too (JSON lines under --json), not in their own formats.
			liblog.Install(a.log.Handler())
			return a.checkNumbers(cmd.Flags())
		},
	}
	// Only --json and --log-level are global; every other flag is given
	// to the commands that read it (flagGroups below), so a command's help
	// lists what it uses and nothing else.
	f := root.PersistentFlags()
	f.BoolVar(&a.jsonOut, "json", false, "machine-readable JSON output")
	f.StringVar(&a.logLevel, "log-level", "warn", "log level: debug, info, warn, error")

	// node, attest and mcp take the same node flags (attest and mcp
	// without the node command's own: first contact, discovery, abuse
	// limits, the HTTP door); every other command takes only what it
	// reads.
	nodeFlags := []flagGroup{groupIdentity, groupLLM, groupChallenges, groupPool, groupNet}
	node := a.withLLMPoolDefault(a.nodeCmd())
	a.addFlags(node.Flags(), nodeFlags...)
	attest := a.withLLMPoolDefault(a.attestCmd())
	a.addFlags(attest.Flags(), nodeFlags...)
	mcp := a.withLLMPoolDefault(a.mcpCmd())
	a.addFlags(mcp.Flags(), nodeFlags...)
	// A one-shot attest and mcp listen on ephemeral ports unless told
	// otherwise (their own defaults, attest.go and mcp.go).
	attest.Flags().Lookup("listen").Usage = "listen multiaddr (repeatable; default ephemeral TCP and QUIC ports on loopback and all interfaces, not the node's 4717)"
	mcp.Flags().Lookup("listen").Usage = attest.Flags().Lookup("listen").Usage
	demo := a.demoCmd()
	a.addFlags(demo.Flags(), groupLLM, groupSource, groupPolicy, groupPool)
	// demo is not a node: auto stays procedural with --llm too (the agent
	// row is then verified on procedural challenges).
	demo.Flags().Lookup("challenges").Usage = "challenge source: procedural (offline generator), examples (the embedded corpus), corpus:DIR, llm (a pool of sets generated and validated with --llm), hybrid (a pool of procedural sets reworded by --llm, ground truth kept); auto is procedural, with or without --llm"
	eval := a.evalCmd()
	a.addFlags(eval.Flags(), groupLLM, groupPolicy, groupPool)
	generate := a.generateCmd()
	a.addFlags(generate.Flags(), groupLLM, groupPolicy, groupTokenBudget, groupCrossCheck)
	// generate caps its tokens only when asked (generateCmd).
	if fl := generate.Flags().Lookup("pool-token-budget"); fl != nil {
		fl.Usage, fl.DefValue = "tokens this run may spend on generation per hour (0: no cap)", "0"
	}
	peers := a.peersCmd()
	a.addFlags(peers.Flags(), groupStore, groupTrust)
	// attestations, challenge and bench give their flags to the
	// subcommands that read them.
	root.Annotations = map[string]string{annotVersionJSON: buildVersion().jsonText()}
	root.SetVersionTemplate(versionTemplate)
	root.AddCommand(node, attest, a.attestationsCmd(), demo, eval, generate, a.challengeCmd(), peers, a.benchCmd(), a.versionCmd(), mcp)
	for _, c := range []*cobra.Command{node, mcp} {
		c.Annotations = map[string]string{annotServe: "true"}
	}
	root.SetHelpCommand(a.helpCmd())
	// --help --json and help CMD --json: the help as one JSON object, as
	// every other output under --json.
	textHelp := root.HelpFunc()
	root.SetHelpFunc(func(c *cobra.Command, args []string) {
		if a.jsonOut {
			if err := helpJSON(c); err == nil {
				return
			}
		}
		textHelp(c, args)
	})
	root.InitDefaultCompletionCmd()
	tagUsageErrors(root)
	return root
}

// tagUsageErrors makes every error cobra itself reports (unknown flags,
// bad flag values, wrong arguments, unknown commands) a usage error
// (exit 2), and every command that only groups subcommands refuse
// arguments: a mistyped subcommand is an error, with cobra's "did you
// mean" suggestions, not a help page and exit 0.
func tagUsageErrors(root *cobra.Command) {
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: exitUsage, err: err}
	})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.HasSubCommands() {
			groupCmd(c)
		} else if args := c.Args; args != nil {
			c.Args = func(cmd *cobra.Command, a []string) error {
				if err := args(cmd, a); err != nil {
					var ee *exitError
					if errors.As(err, &ee) {
						return err
					}
					if msg := argCountMessage(cmd, a); msg != "" {
						err = errors.New(msg)
					}
					return &exitError{code: exitUsage, err: err}
				}
				// An empty argument is most often an unset shell
				// variable ("$KEY", "$FILE"), as an empty flag value is:
				// it read "error: : open : no such file or directory" or
				// "no attestation with key  (...)".
				names := strings.Fields(cmd.Use)[1:]
				for i, x := range a {
					if strings.TrimSpace(x) != "" {
						continue
					}
					name := "an argument"
					if i < len(names) {
						name = names[i]
					}
					return &exitError{code: exitUsage, err: fmt.Errorf("%s: %s is empty (an unset shell variable?): give a value; usage: %s %s", cmd.CommandPath(), name, cmd.CommandPath(), strings.Join(names, " "))}
				}
				return nil
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// argCountMessage words a wrong argument count for a command whose Use
// names its arguments ("attest MULTIADDR"): cobra's own "accepts 1
// arg(s), received 0" names neither the command nor what it wants. A
// command that takes none says so: cobra's "unknown command \"X\" for
// \"acaptcha node\"" read as if node had subcommands, for what is
// mostly a flag's value given without its flag.
func argCountMessage(cmd *cobra.Command, args []string) string {
	names := strings.Fields(cmd.Use)[1:]
	if len(names) == 0 && len(args) > 0 {
		msg := fmt.Sprintf("%s takes no arguments, got %d (%s): flags start with -- (%q lists them)",
			cmd.CommandPath(), len(args), quoteJoinAnd(args), cmd.CommandPath()+" --help")
		// A flag whose value is optional (--limit-loopback, alone, means
		// on) takes a value only after "=": "--limit-loopback off" set it
		// on and left "off" as an argument.
		var optional []string
		cmd.Flags().Visit(func(f *pflag.Flag) {
			// Bool flags have a bare value too ("true"), but "--json x"
			// is no value given after a space.
			if f.NoOptDefVal != "" && f.Value.Type() != "bool" {
				optional = append(optional, "--"+f.Name)
			}
		})
		if len(optional) > 0 {
			msg += fmt.Sprintf("; %s takes its value after '=' (%s=VALUE)", strings.Join(optional, ", "), optional[0])
		}
		return msg
	}
	if len(names) == 0 || len(args) == len(names) {
		return ""
	}
	want := strings.Join(names, " ")
	usage := fmt.Sprintf("usage: %s %s (%q has more)", cmd.CommandPath(), want, cmd.CommandPath()+" --help")
	if len(args) < len(names) {
		return fmt.Sprintf("%s: missing %s; %s", cmd.CommandPath(), strings.Join(names[len(args):], " "), usage)
	}
	n := fmt.Sprintf("%d arguments", len(names))
	if len(names) == 1 {
		n = "one argument"
	}
	return fmt.Sprintf("%s takes %s, %s, got %d (%s; quote a path with spaces); %s",
		cmd.CommandPath(), n, want, len(args), quoteJoinAnd(args), usage)
}

func quoteJoinAnd(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = strconv.Quote(x)
	}
	return strings.Join(q, ", ")
}

// groupCmd makes c, a command that groups subcommands, print its help
// when called alone and refuse anything else as an unknown command.
func groupCmd(c *cobra.Command) {
	c.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		return unknownCommand(cmd, args[0])
	}
	if c.RunE == nil && c.Run == nil {
		c.RunE = func(cmd *cobra.Command, _ []string) error {
			if j, err := cmd.Flags().GetBool("json"); err == nil && j {
				return groupJSON(cmd)
			}
			return cmd.Help()
		}
	}
}

// groupJSON is a group command's help under --json: its path, what it
// does and its subcommands, so that standard output stays JSON.
func groupJSON(c *cobra.Command) error { return helpJSON(c) }

// helpJSON is a command's help under --json (--help --json, help CMD
// --json, a group command alone): its path, usage, what it does, its
// subcommands and its flags with their defaults and environment
// variables, so that standard output stays JSON.
func helpJSON(c *cobra.Command) error {
	type sub struct {
		Name  string `json:"name"`
		Use   string `json:"use"`
		Short string `json:"short"`
	}
	type flag struct {
		Name      string `json:"name"`
		Shorthand string `json:"shorthand,omitempty"`
		Type      string `json:"type"`
		Default   string `json:"default"`
		Usage     string `json:"usage"`
		Env       string `json:"env"`
	}
	out := struct {
		Command     string `json:"command"`
		Use         string `json:"use"`
		Short       string `json:"short"`
		Long        string `json:"long,omitempty"`
		Commands    []sub  `json:"commands"`
		Flags       []flag `json:"flags"`
		GlobalFlags []flag `json:"global_flags"`
	}{Command: c.CommandPath(), Use: c.UseLine(), Short: c.Short, Long: c.Long, Commands: []sub{}, Flags: []flag{}, GlobalFlags: []flag{}}
	for _, s := range c.Commands() {
		if s.IsAvailableCommand() {
			out.Commands = append(out.Commands, sub{Name: s.Name(), Use: s.CommandPath() + strings.TrimPrefix(s.Use, s.Name()), Short: s.Short})
		}
	}
	add := func(to *[]flag) func(*pflag.Flag) {
		return func(fl *pflag.Flag) {
			if fl.Hidden || fl.Name == "help" {
				return
			}
			*to = append(*to, flag{Name: fl.Name, Shorthand: fl.Shorthand, Type: fl.Value.Type(), Default: fl.DefValue, Usage: fl.Usage, Env: flagEnv(fl)})
		}
	}
	c.NonInheritedFlags().VisitAll(add(&out.Flags))
	c.InheritedFlags().VisitAll(add(&out.GlobalFlags))
	enc := json.NewEncoder(c.OutOrStdout())
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// unknownCommand is the usage error for a word that names no subcommand
// of c, with cobra's suggestions.
func unknownCommand(c *cobra.Command, word string) error {
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2
	}
	msg := fmt.Sprintf("unknown command %q for %q", word, c.CommandPath())
	sug := c.SuggestionsFor(word)
	// A command of a group named without its group (README's
	// `attestations verify` typed as `acaptcha verify`): cobra suggests
	// by spelling only.
	for _, g := range c.Commands() {
		for _, sub := range g.Commands() {
			if sub.IsAvailableCommand() && (sub.Name() == word || sub.HasAlias(word)) {
				sug = append(sug, g.Name()+" "+sub.Name())
			}
		}
	}
	if hint, ok := doorWords[word]; ok && c.Parent() == nil {
		sug = append(sug, hint)
	}
	if len(sug) > 0 {
		msg += fmt.Sprintf("; did you mean %s?", quoteJoin(sug))
	}
	if c.HasAvailableSubCommands() {
		msg += fmt.Sprintf(" (%q lists its commands)", c.CommandPath()+" --help")
	}
	return &exitError{code: exitUsage, err: errors.New(msg)}
}

// doorWords are words a new user may type for a door that is a flag of
// a command: the HTTP door is node's --http.
var doorWords = map[string]string{"http": "node --http HOST:PORT"}

func quoteJoin(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = strconv.Quote(x)
	}
	return strings.Join(q, " or ")
}

// helpCmd replaces cobra's help command, which prints the root's help and
// exits 0 for a topic it does not know.
func (a *app) helpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || cmd == nil {
				return unknownCommand(c.Root(), strings.Join(args, " "))
			}
			if len(rest) > 0 {
				return unknownCommand(cmd, rest[0])
			}
			cmd.InitDefaultHelpFlag()
			return cmd.Help()
		},
	}
}

// bindEnv sets every flag the user did not give from ACAPTCHA_<NAME>
// (upper case, dashes as underscores). Repeatable flags take a
// comma-separated list.
// envName is the variable that sets flag name: ACAPTCHA_ and the name
// in capitals with - as _.
func envName(flag string) string {
	return "ACAPTCHA_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// envAnnotation names, on a flag, a variable other than envName's: a flag
// whose name another command uses for something else (mcp --http, the
// MCP transport, against node --http, the HTTP door) must not be set by
// the other's variable.
const envAnnotation = "acaptcha-env"

// flagEnv is the environment variable that sets fl.
func flagEnv(fl *pflag.Flag) string {
	if v := fl.Annotations[envAnnotation]; len(v) == 1 {
		return v[0]
	}
	return envName(fl.Name)
}

func bindEnv(fs *pflag.FlagSet) error {
	var errs []error
	fs.VisitAll(func(fl *pflag.Flag) {
		if fl.Changed {
			return
		}
		name := flagEnv(fl)
		v, ok := os.LookupEnv(name)
		if !ok {
			return
		}
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			if err := sv.Replace(strings.Split(v, ",")); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
			return
		}
		if err := fl.Value.Set(v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", name, v, err))
		}
	})
	return errors.Join(errs...)
}

func (a *app) policy() (skill.Policy, error) {
	p := skill.DefaultPolicy()
	p.Rounds = a.rounds
	p.Tau = a.tau
	p.DeriveTau = a.deriveTau
	p.Total = a.total
	err := p.Check()
	if err == nil && p.Total > protocol.MaxTotal {
		// The node's own limits refuse it at start (exit 1, "start
		// node: node: Config.Limits: ..."): no prover accepts a longer
		// session, so no command can use it. (The flag is named: an
		// ACAPTCHA_TOTAL replaces it in the message, envNamed.)
		return p, usageErr("%v: --total %s exceeds the protocol maximum %s (no prover accepts a longer session)", skill.ErrPolicy, a.total, protocol.MaxTotal)
	}
	if err == nil && p.RTTCredit > p.Total {
		// Refused by the attestation service at start, exit 1.
		return p, usageErr("%v: --total %s is below the RTT credit %s the verifier grants a session: want at least that", skill.ErrPolicy, a.total, p.RTTCredit)
	}
	if err != nil {
		// The policy names tau, total and rounds; say which of them came
		// from the environment, where no flag on the command line shows.
		var env []string
		for _, name := range []string{"rounds", "tau", "total"} {
			if a.fromEnv[name] {
				env = append(env, envName(name)+"="+os.Getenv(envName(name)))
			}
		}
		if len(env) > 0 {
			return p, usageErr("%v (set by %s)", err, strings.Join(env, ", "))
		}
		return p, usageErr("%v", err)
	}
	return p, nil
}

// source builds the challenge source --challenges names (sources.go).
// ledger records served sets (the node's store); nil keeps them in
// memory.
func (a *app) source(ledger skill.Ledger, maxServes int) (skill.Source, error) {
	src, arg, err := lookupChallenges(a.challenges)
	if err != nil {
		return nil, usageErr("--challenges: %v", err)
	}
	return src.build(a, arg, ledger, maxServes)
}

// prover builds the LLM solver, or returns nil when no LLM is configured.
func (a *app) prover(ctx context.Context) (skill.Prover, string, error) {
	if a.llmSpec == "" {
		return nil, "", nil
	}
	m, err := llm.New(ctx, llm.Config{Spec: a.llmSpec, BaseURL: a.llmBaseURL})
	if err != nil {
		return nil, "", usageErr("--llm %s: %v", a.llmSpec, err)
	}
	return solve.New(m, solve.Config{Memory: true, MaxAnswerTokens: a.answerTokens}), a.llmSpec, nil
}

// maxAnswerTokens bounds --answer-max-tokens: a reasoning model's
// thinking fits well within it, and a round's time budget (tau) ends the
// call long before a larger cap would matter.
const maxAnswerTokens = 32768

const noLLMHint = "no LLM configured: this node cannot answer challenges. Configure one with --llm openai:MODEL (OPENAI_API_KEY, optionally --llm-base-url or OPENAI_BASE_URL for any OpenAI-compatible server), --llm anthropic:MODEL (ANTHROPIC_API_KEY), --llm googleai:MODEL (GOOGLE_API_KEY) or --llm ollama:MODEL (OLLAMA_HOST)"

// flagGroup is a set of flags that several commands read.
type flagGroup int

const (
	groupStore       flagGroup = iota // --store
	groupIdentity                     // --key, --store
	groupLLM                          // --llm, --llm-base-url
	groupPolicy                       // --tau, --derive-tau, --total, --rounds
	groupSource                       // --challenges
	groupChallenges                   // groupSource, --max-serves, groupPolicy
	groupPool                         // --pool-size, --pool-workers, --pool-wait, groupTokenBudget, groupCrossCheck
	groupTokenBudget                  // --pool-token-budget
	groupCrossCheck                   // --cross-check-llm
	groupTrust                        // --trust-quorum, --require-source
	groupGossip                       // --gossip
	groupNet                          // --listen, NAT, trust, gossip, gater, metrics
)

// addFlags defines the flags of groups on fs, bound to a's fields (a flag
// defined on several commands binds the same field; only the command that
// runs parses it).
func (a *app) addFlags(f *pflag.FlagSet, groups ...flagGroup) {
	data := defaultDataDir()
	for _, g := range groups {
		switch g {
		case groupStore:
			f.StringVar(&a.storePath, "store", filepath.Join(data, "acaptcha.db"), "attestation store (bbolt)")
		case groupIdentity:
			f.StringVar(&a.keyFile, "key", filepath.Join(data, "key"), "node identity key file (created on first run, mode 0600)")
			a.addFlags(f, groupStore)
		case groupLLM:
			f.StringVar(&a.llmSpec, "llm", "", "LLM that answers challenges: openai:MODEL, anthropic:MODEL, ollama:MODEL or googleai:MODEL (keys from the providers' usual environment variables); none, or leaving the flag out, for no LLM (an empty value is refused)")
			f.StringVar(&a.llmBaseURL, "llm-base-url", "", "base URL of an OpenAI-compatible (or other provider's) server")
			f.IntVar(&a.answerTokens, "answer-max-tokens", solve.DefaultMaxAnswerTokens, "output-token cap of each answer the LLM writes as prover, and as the solver that cross-checks the sets it generates (an answer is at most 64 bytes; a reasoning model that thinks before it answers, such as deepseek-r1, qwen3 or OpenAI's o-series, needs room for its reasoning: 2048 or more)")
		case groupPolicy:
			f.DurationVar(&a.tau, "tau", skill.DefaultTau, "per-round time budget")
			f.BoolVar(&a.deriveTau, "derive-tau", false, "derive each round's budget from its narrative length (paper Eq. 13, alpha 0.1) instead of --tau")
			f.DurationVar(&a.total, "total", skill.DefaultTotal, "total budget of one session (T_total)")
			f.IntVar(&a.rounds, "rounds", skill.DefaultRounds, "chained rounds per session (1-3)")
		case groupSource:
			f.StringVar(&a.challenges, "challenges", "auto", "challenge source: procedural (offline generator), examples (the embedded corpus), corpus:DIR, llm (a pool of sets generated and validated with --llm), hybrid (a pool of procedural sets reworded by --llm, ground truth kept); auto picks llm with --llm (attest writes its one set before it dials), else procedural")
		case groupChallenges:
			f.IntVar(&a.maxServes, "max-serves", skill.DefaultMaxServes, "how often this node serves one challenge set")
			a.addFlags(f, groupSource, groupPolicy)
		case groupPool:
			f.IntVar(&a.gen.poolSize, "pool-size", pool.DefaultSize, "generated challenge sets kept ready (llm or hybrid challenges)")
			f.IntVar(&a.gen.poolWorkers, "pool-workers", pool.DefaultWorkers, "challenge sets generated at once (llm or hybrid challenges)")
			f.DurationVar(&a.gen.poolWait, "pool-wait", pool.DefaultWait, "how long a session waits for a set when the pool is empty before ending inconclusive")
			a.addFlags(f, groupTokenBudget, groupCrossCheck)
		case groupTokenBudget:
			f.IntVar(&a.gen.tokenBudget, "pool-token-budget", pool.DefaultTokenBudget, "tokens challenge generation may spend per hour (0: no cap)")
		case groupCrossCheck:
			f.StringVar(&a.gen.crossCheck, "cross-check-llm", "", "a second LLM (provider:MODEL) whose solver must also reproduce every generated answer; none, or leaving the flag out, for no cross-check (an empty value is refused)")
		case groupTrust:
			f.IntVar(&a.trustQuorum, "trust-quorum", 0, "admit a peer without a fresh challenge when at least K issuers this node verified directly attest it (0: direct verification only)")
			f.StringVar(&a.requireSource, "require-source", string(peer.DefaultRequireSource), "weakest challenge source an attestation must name to admit its subject or count toward the trust quorum: procedural, corpus, hybrid or llm (hybrid and llm rank equally), or any")
		case groupGossip:
			f.BoolVar(&a.gossip, "gossip", true, "share accepted attestations on GossipSub and learn others'")
		case groupNet:
			f.StringArrayVar(&a.listen, "listen", nil, "listen multiaddr (repeatable; default TCP and QUIC on port 4717)")
			f.BoolVar(&a.nat.enable, "nat", true, "NAT traversal: hole punching, AutoNAT v2 and UPnP/NAT-PMP port mapping")
			f.StringArrayVar(&a.nat.relays, "relay", nil, "static circuit-v2 relay multiaddr ending in /p2p/PEER_ID, used when the node is unreachable (repeatable)")
			f.BoolVar(&a.nat.relayService, "relay-service", false, "act as a circuit-v2 relay for other nodes once AutoNAT finds this node publicly reachable")
			f.DurationVar(&a.blockRejected, "block-rejected", 0, "block peers this node rejects at the connection gater for this long (0: never)")
			f.StringVar(&a.metricsAddr, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics (and the peer list at /peers), e.g. 127.0.0.1:9464; off, or leaving the flag out, for none (an empty value is refused)")
			a.addFlags(f, groupTrust, groupGossip)
		}
	}
}

// oneLine joins the lines of a multi-line error message (libp2p's "all
// dials failed" lists each address tried on an indented line of its own)
// with "; ", so that the error stays the one line "error: ..." the README
// promises.
func oneLine(msg string) string {
	if !strings.ContainsAny(msg, "\r\n") {
		return msg
	}
	var parts []string
	for _, l := range strings.FieldsFunc(msg, func(r rune) bool { return r == '\n' || r == '\r' }) {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}

// jsonRequested reports whether args or the environment ask for --json,
// for an error met before the flags were parsed or bound to the
// environment (an unknown command or flag, a missing argument): the last
// --json or --json=BOOL before a "--" decides, else ACAPTCHA_JSON.
func jsonRequested(args []string) bool {
	set, on := false, false
	for _, arg := range args {
		if arg == "--" {
			break
		}
		if arg == "--json" {
			set, on = true, true
		} else if v, ok := strings.CutPrefix(arg, "--json="); ok {
			b, err := strconv.ParseBool(v)
			set, on = true, err == nil && b
		}
	}
	if set {
		return on
	}
	b, err := strconv.ParseBool(os.Getenv(envName("json")))
	return err == nil && b
}

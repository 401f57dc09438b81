package main

import (
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestReadmeNamesEveryFlag: every flag of the commands an operator runs
// (documented), node, attest, mcp, attestations and peers, and the
// global ones, is named in README.md (as `--name`), so a flag added to
// them without a word in the configuration docs fails here; the tools
// (generate, eval, challenge, bench, demo, completion) document theirs in
// --help. Every `--name` README gives is a flag of some command, so a
// renamed or removed flag does not live on in the docs.
func TestReadmeNamesEveryFlag(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	named := map[string]bool{}
	for _, m := range regexp.MustCompile(`--([a-z][a-z0-9-]*[a-z0-9])`).FindAllStringSubmatch(readme, -1) {
		named[m[1]] = true
	}
	flags := map[string][]string{} // flag -> documented commands that take it
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		visit := func(f *pflag.Flag) {
			if !f.Hidden && documented(c) {
				flags[f.Name] = append(flags[f.Name], c.CommandPath())
			}
		}
		c.LocalFlags().VisitAll(visit)
		c.PersistentFlags().VisitAll(visit)
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if _, ok := flags[f.Name]; !ok {
				flags[f.Name] = nil // a flag of some command
			}
		})
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	root := (&app{stdout: io.Discard, stderr: io.Discard}).rootCmd()
	root.InitDefaultHelpFlag()
	root.InitDefaultVersionFlag()
	walk(root)
	var missing []string
	for f, cmds := range flags {
		if f == "help" || f == "version" {
			continue
		}
		if !named[f] && len(cmds) > 0 {
			missing = append(missing, "--"+f+" ("+strings.Join(cmds, ", ")+")")
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("README.md does not name %s", m)
	}
	var stale []string
	for f := range named {
		if _, ok := flags[f]; !ok && !notAFlag[f] {
			stale = append(stale, "--"+f)
		}
	}
	sort.Strings(stale)
	for _, s := range stale {
		t.Errorf("README.md names %s, a flag of no command", s)
	}
}

// documented reports whether README.md must name every flag of c: the
// root and the commands an operator runs.
func documented(c *cobra.Command) bool {
	if !c.HasParent() {
		return true
	}
	top := c
	for top.Parent().HasParent() {
		top = top.Parent()
	}
	switch top.Name() {
	case "node", "attest", "mcp", "attestations", "peers":
		return true
	}
	return false
}

// notAFlag are `--words` README writes that are no acaptcha flag: other
// tools' flags and arguments.
var notAFlag = map[string]bool{}

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// versionInfo is what `acaptcha version` prints. Under --json every
// field is always there: commit is "" when the binary carries no VCS
// stamp (built outside a checkout, with -buildvcs=false, or installed
// with go install ...@VERSION), and modified is then false.
type versionInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Modified  bool   `json:"modified"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
}

// buildVersion reads the module version (set by `go install ...@VERSION`)
// and the VCS stamp (set by `go build` in a checkout) from the binary.
func buildVersion() versionInfo {
	v := versionInfo{Version: "(devel)", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go toolchain of this binary",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			v := buildVersion()
			if a.jsonOut {
				return writeJSON(a, v)
			}
			fmt.Fprintln(a.stdout, v.line())
			return nil
		},
	}
}

// annotVersionJSON is the root command's annotation holding what
// `version --json` prints, for --version --json (versionTemplate).
const annotVersionJSON = "acaptcha_version_json"

// versionTemplate is the root's --version template: the line of
// `acaptcha version`, or under --json its JSON object, so that --json
// gets JSON from --version too.
const versionTemplate = `{{if versionJSON .}}{{index .Annotations "` + annotVersionJSON + `"}}{{else}}{{.Version}}
{{end}}`

func init() {
	// Template functions are global in cobra: this one reads only the
	// command it is given.
	cobra.AddTemplateFunc("versionJSON", func(c *cobra.Command) bool {
		j, err := c.Flags().GetBool("json")
		return err == nil && j
	})
}

// jsonText is v as writeJSON prints it.
func (v versionInfo) jsonText() string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf("{\"error\": %q}\n", err.Error())
	}
	return b.String()
}

// line is the version as `acaptcha version` prints it (and --version).
func (v versionInfo) line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "acaptcha %s", v.Version)
	switch {
	case v.Commit != "":
		fmt.Fprintf(&b, " (commit %.12s", v.Commit)
		if v.Modified {
			fmt.Fprint(&b, ", modified")
		}
		fmt.Fprint(&b, ")")
	case v.Version == "(devel)":
		// Built outside a checkout, or with -buildvcs=false
		// (GOFLAGS): the binary carries no commit.
		fmt.Fprint(&b, " (commit unknown: built without VCS stamping)")
	}
	fmt.Fprintf(&b, " %s %s", v.GoVersion, v.Platform)
	return b.String()
}

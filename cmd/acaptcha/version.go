package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// versionInfo is what `acaptcha version` prints.
type versionInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
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
			fmt.Fprintf(a.stdout, "acaptcha %s", v.Version)
			if v.Commit != "" {
				fmt.Fprintf(a.stdout, " (commit %.12s", v.Commit)
				if v.Modified {
					fmt.Fprint(a.stdout, ", modified")
				}
				fmt.Fprint(a.stdout, ")")
			}
			fmt.Fprintf(a.stdout, " %s %s\n", v.GoVersion, v.Platform)
			return nil
		},
	}
}

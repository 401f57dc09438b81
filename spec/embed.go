// Package spec embeds the public example corpus so that the binary carries
// a working default with no files beside it. The documents of this folder
// (SKILL.md, protocol.md, attestation.md) are the public specification.
package spec

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/acaptcha/acaptcha/skill"
)

//go:embed examples/*.json
var examples embed.FS

// Examples returns the shipped example challenge sets, validated.
func Examples() ([]*skill.Set, error) {
	entries, err := fs.ReadDir(examples, "examples")
	if err != nil {
		return nil, fmt.Errorf("embedded examples: %w", err)
	}
	var sets []*skill.Set
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		data, err := examples.ReadFile("examples/" + e.Name())
		if err != nil {
			return nil, fmt.Errorf("embedded example %s: %w", e.Name(), err)
		}
		s, err := skill.DecodeSet(data)
		if err != nil {
			return nil, fmt.Errorf("embedded example %s: %w", e.Name(), err)
		}
		sets = append(sets, s)
	}
	sort.Slice(sets, func(i, j int) bool { return sets[i].ID < sets[j].ID })
	return sets, nil
}

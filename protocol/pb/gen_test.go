package pb

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestGeneratedUpToDate regenerates every spec/proto/*.proto into a
// temporary directory and requires the output to equal the committed
// protocol/pb/*.pb.go files byte for byte, and every committed .pb.go to
// have its .proto. Without protoc or protoc-gen-go it is
// skipped, except under CI=true, where it fails.
func TestGeneratedUpToDate(t *testing.T) {
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		missingTool(t, "protoc", err)
		return
	}
	plugin, err := lookupPlugin()
	if err != nil {
		missingTool(t, "protoc-gen-go", err)
		return
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	protos, err := specProtos(root)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	args := []string{"--plugin=protoc-gen-go=" + plugin, "-I", root, "--go_out=" + out, "--go_opt=module=" + modulePath}
	for _, p := range protos {
		args = append(args, filepath.ToSlash(filepath.Join(protoDir, p)))
	}
	cmd := exec.Command(protoc, args...)
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("protoc %s: %v\n%s", strings.Join(args, " "), err, msg)
	}
	for _, p := range protos {
		name := strings.TrimSuffix(p, ".proto") + ".pb.go"
		got, err := os.ReadFile(filepath.Join(out, "protocol", "pb", name))
		if err != nil {
			t.Fatalf("generated %s: %v", name, err)
		}
		want, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("committed %s: %v (run go generate ./protocol/pb)", name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: regenerating %s changes it; run go generate ./protocol/pb and commit the result", name, p)
		}
	}
}

// modulePath is the Go module; protoc writes by go_package below it.
const modulePath = "github.com/acaptcha/acaptcha"

// protoDir is where the schema lives, relative to the module root.
const protoDir = "spec/proto"

// specProtos lists the .proto files of spec/proto.
func specProtos(root string) ([]string, error) {
	paths, err := filepath.Glob(filepath.Join(root, protoDir, "*.proto"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no .proto files in %s", protoDir)
	}
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = filepath.Base(p)
	}
	sort.Strings(names)
	return names, nil
}

// TestSchemaInSpec needs no protoc: every generated file here has its
// schema in spec/proto, registered under that path, and no .proto is left
// outside the spec.
func TestSchemaInSpec(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	protos, err := specProtos(root)
	if err != nil {
		t.Fatal(err)
	}
	stray, err := filepath.Glob("*.proto")
	if err != nil {
		t.Fatal(err)
	}
	if len(stray) > 0 {
		t.Errorf(".proto files outside spec/proto: %v", stray)
	}
	gen, err := filepath.Glob("*.pb.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(gen) != len(protos) {
		t.Errorf("%d generated files for %d schemas in %s", len(gen), len(protos), protoDir)
	}
	for _, p := range protos {
		name := strings.TrimSuffix(p, ".proto") + ".pb.go"
		data, err := os.ReadFile(name)
		if err != nil {
			t.Errorf("%s has no generated %s: %v", p, name, err)
			continue
		}
		if src := "// source: " + protoDir + "/" + p + "\n"; !bytes.Contains(data, []byte(src)) {
			t.Errorf("%s was not generated from %s/%s", name, protoDir, p)
		}
	}
}

// lookupPlugin finds protoc-gen-go on PATH or in GOBIN / GOPATH/bin, where
// `go install` puts it.
func lookupPlugin() (string, error) {
	p, err := exec.LookPath("protoc-gen-go")
	if err == nil {
		return p, nil
	}
	var dirs []string
	if gobin := os.Getenv("GOBIN"); gobin != "" {
		dirs = append(dirs, gobin)
	}
	if out, gerr := exec.Command("go", "env", "GOPATH").Output(); gerr == nil {
		for _, d := range filepath.SplitList(strings.TrimSpace(string(out))) {
			dirs = append(dirs, filepath.Join(d, "bin"))
		}
	}
	for _, d := range dirs {
		c := filepath.Join(d, "protoc-gen-go")
		if fi, serr := os.Stat(c); serr == nil && !fi.IsDir() {
			return c, nil
		}
	}
	return "", err
}

func missingTool(t *testing.T, name string, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is required under CI=true to check the generated code: %v", name, err)
	}
	t.Skipf("%s not found, skipping the regeneration check: %v", name, err)
}

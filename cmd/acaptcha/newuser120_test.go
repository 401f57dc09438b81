package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acaptcha/acaptcha/peer"
)

// attestations export -o over a file that holds something else than an
// attestation (the store itself, its write-ahead log, the node's key, any
// other file) is refused, exit 2, and the file is left as it was: before,
// `export KEY -o acaptcha.db` wrote the 395-byte envelope over the store
// (every record lost, "store is damaged" afterwards) and `-o key` over
// the node's identity. An earlier export, an empty file and a new name
// are written as before.
func TestNewUser120ExportKeepsOtherFiles(t *testing.T) {
	dir := t.TempDir()
	store, key, env := storeWithOne(t, dir)
	keyFile := filepath.Join(dir, "key")
	if _, err := peer.LoadOrCreateKey(keyFile, nil); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(other, []byte("my notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, target := range []string{store, store + "-wal", keyFile, other} {
		before, err := os.ReadFile(target)
		if err != nil {
			if target == store+"-wal" && os.IsNotExist(err) {
				continue
			}
			t.Fatal(err)
		}
		for _, js := range []bool{false, true} {
			args := []string{"attestations", "export", key, "--store", store, "-o", target}
			if js {
				args = append(args, "--json")
			}
			out, errOut, code := newUserMain(ctx, args...)
			if code != exitUsage || out != "" || !strings.Contains(errOut, "holds no attestation") {
				t.Errorf("export -o %s (json %v): exit %d, stdout %q, stderr %q; want exit %d and the file kept", filepath.Base(target), js, code, out, errOut, exitUsage)
			}
			if js {
				if msg, ec := jsonError(t, lastLine(errOut)); ec != exitUsage || msg == "" {
					t.Errorf("export -o %s --json: error object %q/%d", filepath.Base(target), msg, ec)
				}
			}
			after, err := os.ReadFile(target)
			if err != nil || !bytes.Equal(before, after) {
				t.Fatalf("export -o %s changed the file (%d bytes before, %d after, %v)", filepath.Base(target), len(before), len(after), err)
			}
		}
	}
	// The store still reads.
	if out, errOut, code := newUserMain(ctx, "attestations", "list", "--store", store); code != exitOK || !strings.Contains(out, shortKey(key)) {
		t.Fatalf("list after the refused exports: exit %d\n%s\n%s", code, out, errOut)
	}
	// A new file, an empty one and an earlier export are written.
	empty := filepath.Join(dir, "empty.att")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(dir, "peer.att")
	for _, target := range []string{fresh, fresh, empty} {
		if out, errOut, code := newUserMain(ctx, "attestations", "export", key, "--store", store, "-o", target); code != exitOK {
			t.Fatalf("export -o %s: exit %d\n%s\n%s", filepath.Base(target), code, out, errOut)
		}
		if got, err := os.ReadFile(target); err != nil || !bytes.Equal(got, env) {
			t.Fatalf("export -o %s: file holds %d bytes, %v", filepath.Base(target), len(got), err)
		}
	}
}

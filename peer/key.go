package peer

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/libp2p/go-libp2p/core/crypto"
)

// LoadOrCreateKey reads the node's identity (a libp2p private key, of any
// type) from path, creating an Ed25519 one (mode 0600, parent directories
// 0700) on first run. A key file readable by
// group or others is refused: it is the node's identity.
func LoadOrCreateKey(path string, log *slog.Logger) (crypto.PrivKey, error) {
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		fi, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("key file %s: %w", path, err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			return nil, fmt.Errorf("key file %s has mode %v: it must not be readable by others (chmod 600)", path, fi.Mode().Perm())
		}
		if len(data) == 0 {
			return nil, fmt.Errorf("key file %s is empty: move it away to have a new identity made there, or give --key the node's key file", path)
		}
		k, err := crypto.UnmarshalPrivateKey(data)
		if err != nil {
			return nil, fmt.Errorf("key file %s is not a libp2p private key (this node's identity; a new one is made when the file does not exist): %w", path, err)
		}
		return k, nil
	case errors.Is(err, fs.ErrNotExist):
		k, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("generate identity: %w", err)
		}
		raw, err := crypto.MarshalPrivateKey(k)
		if err != nil {
			return nil, fmt.Errorf("encode identity: %w", err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("key directory: %w", err)
		}
		// O_EXCL: two processes starting at once must not overwrite each
		// other's fresh identity.
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			if errors.Is(err, fs.ErrExist) {
				return LoadOrCreateKey(path, log)
			}
			return nil, fmt.Errorf("create key file: %w", err)
		}
		if _, err := f.Write(raw); err != nil {
			f.Close()
			return nil, fmt.Errorf("write key file: %w", err)
		}
		if err := f.Close(); err != nil {
			return nil, fmt.Errorf("write key file: %w", err)
		}
		if log != nil {
			log.Info("created node identity", "path", path)
		}
		return k, nil
	default:
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/spf13/cobra"
)

func contextWithTimeout(cmd *cobra.Command, d time.Duration) (context.Context, context.CancelFunc) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	return context.WithTimeout(ctx, d)
}

// contextWithFlagTimeout is contextWithTimeout for a limit a flag sets:
// its cause (context.Cause) names the flag, which "context deadline
// exceeded" does not.
func contextWithFlagTimeout(cmd *cobra.Command, flag string, d time.Duration) (context.Context, context.CancelFunc) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	return context.WithTimeoutCause(ctx, d, fmt.Errorf("gave up after %s %s", flag, d))
}

// errInputTooLarge: an input exceeds the size cap of its reader.
var errInputTooLarge = errors.New("input too large")

func readFileCapped(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAllCapped(f, max)
}

func readAllCapped(r io.Reader, max int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%w: more than %d bytes", errInputTooLarge, max)
	}
	return data, nil
}

// isTerminal reports whether w is a terminal (a character device): the
// progress bars redraw there, and export writes hex there rather than
// raw bytes. A variable so that tests can stand in for a terminal.
var isTerminal = func(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && fileIsTerminal(f)
}

// fileIsTerminal says f is a character device other than the null
// device: a cron job's or a script's `>/dev/null` and `</dev/null` are
// character devices too, and took the progress bars' redraws, the hex
// export and verify's "paste the envelope ... end with Ctrl-D" note.
func fileIsTerminal(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(fi, null)
}

// openableHostPort is the HOST:PORT a user on this machine opens to reach
// a listener bound at a: a listener on every interface (":0", "0.0.0.0",
// "[::]") prints as http://[::]:PORT, which a browser refuses and a user
// cannot reach from another machine either, so its host becomes the
// loopback address (Go binds "tcp" on [::] dual-stack); all says so.
func openableHostPort(a net.Addr) (hostport string, all bool) {
	if ta, ok := a.(*net.TCPAddr); ok && (ta.IP == nil || ta.IP.IsUnspecified()) {
		return net.JoinHostPort("127.0.0.1", fmt.Sprint(ta.Port)), true
	}
	return a.String(), false
}

// allInterfaces is the note a start-up line adds after a URL whose
// listener is bound to every interface.
func allInterfaces(all bool) string {
	if all {
		return " (listening on all interfaces)"
	}
	return ""
}

// stdinReader is the standard input Main gives its commands (a variable
// so that tests can stand in for it).
var stdinReader io.Reader = os.Stdin

// stdinIsTerminal reports whether r is a terminal: a command reading it
// then waits for a person to type (a variable so that tests can stand in
// for a terminal).
var stdinIsTerminal = func(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && fileIsTerminal(f)
}

package main

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
)

// signalAfterOutput is a context the "signal" cancels once the command
// has written its complete output: the command finished, then SIGINT came
// before Main looked at ctx.Err().
type signalAfterOutput struct {
	context.Context
	fired *atomic.Bool
}

func (c signalAfterOutput) Err() error {
	if c.fired.Load() {
		return context.Canceled
	}
	return nil
}

type firingWriter struct {
	bytes.Buffer
	fired *atomic.Bool
}

func (w *firingWriter) Write(p []byte) (int, error) {
	n, err := w.Buffer.Write(p)
	w.fired.Store(true)
	return n, err
}

func TestFinishedThenSignalIsNotInterrupted(t *testing.T) {
	var fired atomic.Bool
	out := &firingWriter{fired: &fired}
	var errb bytes.Buffer
	code := Main(signalAfterOutput{context.Background(), &fired}, []string{"version"}, out, &errb)
	if code != exitOK {
		t.Fatalf("version completed (stdout %q) but exit %d, stderr %q", out.String(), code, errb.String())
	}
}

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// bench abuse --scale NaN is a usage error naming the flag (exit 2), as
// --scale 0 is: NaN passed the CLI's range check (every comparison with it
// is false) and the library refused it as a runtime failure, exit 1,
// "abuse bench: scale NaN: want 0..16".
func TestNewUser128AbuseScaleNaN(t *testing.T) {
	for _, v := range []string{"NaN", "nan", "+Inf", "-Inf"} {
		args := []string{"bench", "abuse", "--scale", v, "--duration", "1s"}
		var out, errb bytes.Buffer
		if code := Main(context.Background(), args, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), "--scale") {
			t.Errorf("%v: exit %d, want %d naming --scale (stderr %q)", args, code, exitUsage, errb.String())
		}
	}
}

package abuse

import (
	"context"
	"strings"
	"testing"
	"time"
)

// The reciprocal flood's detail was empty when the node answered every
// hello (only failures were counted), so the report printed
// "1 reciprocal-flood: " and nothing. It counts what the node made of
// each hello.
func TestReciprocalFloodDetail(t *testing.T) {
	if testing.Short() {
		t.Skip("bench run")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := Config{Duration: 2 * time.Second, Attacks: []string{AttackReciprocalFlood}, Dir: t.TempDir(), Progress: t.Logf}
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Attack) != 1 || rep.Attack[0].Sessions == 0 {
		t.Fatalf("attacks %+v: want one with attempts", rep.Attack)
	}
	d := rep.Attack[0].Detail
	t.Logf("detail: %s", d)
	if !strings.Contains(d, "acked: reciprocal") && !strings.Contains(d, "declined: ") {
		t.Fatalf("reciprocal-flood detail %q: want what the node answered its hellos", d)
	}
}

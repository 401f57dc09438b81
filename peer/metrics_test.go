package peer_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/acaptcha/acaptcha/internal/testutil"
)

// metricFamily returns the gathered family name.
func metricFamily(t *testing.T, reg *prometheus.Registry, name string) *dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	return nil
}

func labelsMatch(m *dto.Metric, want map[string]string) bool {
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// counterValue sums the counters of family name whose labels include want.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	mf := metricFamily(t, reg, name)
	if mf == nil {
		return 0
	}
	var sum float64
	for _, m := range mf.GetMetric() {
		if labelsMatch(m, want) {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

func TestMetrics(t *testing.T) {
	sets := dependentSets(t)
	oracle := testutil.NewOracle(sets...)
	regV, regP := prometheus.NewRegistry(), prometheus.NewRegistry()
	v := startTrustNode(t, sets, trustOpts{reg: regV})
	p := startTrustNode(t, sets, trustOpts{brain: oracle, reg: regP})
	mustAccept(t, v, p)

	mf := metricFamily(t, regV, "acaptcha_round_effective_seconds")
	if mf == nil {
		t.Fatal("no round effective-time histogram")
	}
	var rounds uint64
	for _, m := range mf.GetMetric() {
		rounds += m.GetHistogram().GetSampleCount()
	}
	if rounds != 3 {
		t.Fatalf("%d effective-time samples, want 3", rounds)
	}
	eventually(t, 5*time.Second, "the prover's received metric", func() bool {
		return counterValue(t, regP, "acaptcha_attestations_received_total", map[string]string{"verdict": "accepted", "reason": "ok"}) == 1
	})
	if st := p.Stats(); st.SessionsProved != 1 || st.AttestationsReceived.Accepted != 1 {
		t.Fatalf("prover stats: %+v", st)
	}
	// The verifier stored the record it issued: at least one commit,
	// which the counter reports as the Stats do.
	st := v.Stats()
	if st.StoreCommits == 0 || st.StoreBatchedWrites == 0 {
		t.Fatalf("verifier store counters: %d commits, %d batched writes", st.StoreCommits, st.StoreBatchedWrites)
	}
	mf = metricFamily(t, regV, "acaptcha_store_commits_total")
	if mf == nil || len(mf.GetMetric()) != 1 || mf.GetMetric()[0].GetCounter().GetValue() < float64(st.StoreCommits) {
		t.Fatalf("store commits counter: %v, stats %d", mf, st.StoreCommits)
	}

	v.SetPoolDepth(func() int { return 7 })
	mf = metricFamily(t, regV, "acaptcha_pool_depth")
	if mf == nil || len(mf.GetMetric()) != 1 || mf.GetMetric()[0].GetGauge().GetValue() != 7 {
		t.Fatalf("pool depth gauge: %v", mf)
	}
	// go-libp2p's own metrics go to the node's registry too (the resource
	// manager's stream counts, the swarm's connections).
	// Log lines held back by the rate limits are counted, ours and the
	// libraries' apart.
	mf = metricFamily(t, regV, "acaptcha_log_lines_suppressed_total")
	if mf == nil || len(mf.GetMetric()) != 2 {
		t.Fatalf("log lines suppressed counter: %v", mf)
	}
	for _, name := range []string{"acaptcha_attestations_issued_total", "acaptcha_session_seconds",
		"libp2p_rcmgr_streams", "libp2p_swarm_connections_opened_total"} {
		if metricFamily(t, regV, name) == nil {
			t.Fatalf("%s missing", name)
		}
	}
}

package eval

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
)

// Plot file names (without extension) written by WritePlots.
const (
	TimingPlot = "timing_separation" // Figure 2
	TauPlot    = "tau_sensitivity"   // Figure 3
)

var (
	colAgent   = color.RGBA{R: 31, G: 119, B: 180, A: 255}
	colHuman   = color.RGBA{R: 214, G: 39, B: 40, A: 255}
	colTau     = color.RGBA{R: 44, G: 160, B: 44, A: 255}
	colWindow  = color.NRGBA{R: 44, G: 160, B: 44, A: 40}
	agentShade = []color.RGBA{colAgent, {R: 255, G: 127, B: 14, A: 255}, {R: 148, G: 103, B: 189, A: 255},
		{R: 140, G: 86, B: 75, A: 255}, {R: 23, G: 190, B: 207, A: 255}}
)

// WritePlots writes the Figure-2-like timing separation plot and the
// Figure-3-like tau sensitivity plot of r into dir (created if needed), each
// as PNG and SVG, and returns the paths written.
func WritePlots(r *Report, dir string) ([]string, error) {
	if r == nil {
		return nil, errors.New("write plots: nil report")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("write plots: %w", err)
	}
	var paths []string
	for _, fig := range []struct {
		name  string
		build func(*Report) (*plot.Plot, error)
	}{{TimingPlot, timingPlot}, {TauPlot, tauPlot}} {
		p, err := safeBuild(fig.build, r)
		if err != nil {
			return paths, fmt.Errorf("write plots: %s: %w", fig.name, err)
		}
		for _, ext := range []string{".png", ".svg"} {
			path := filepath.Join(dir, fig.name+ext)
			if err := safeSave(p, path); err != nil {
				return paths, fmt.Errorf("write plots: %w", err)
			}
			paths = append(paths, path)
		}
	}
	return paths, nil
}

// safeBuild and safeSave turn a panic inside the plotting library (it
// panics on some degenerate data, such as non-positive values on a log
// axis) into an error.
func safeBuild(f func(*Report) (*plot.Plot, error), r *Report) (p *plot.Plot, err error) {
	defer func() {
		if v := recover(); v != nil {
			p, err = nil, fmt.Errorf("plotting failed: %v", v)
		}
	}()
	return f(r)
}

func safeSave(p *plot.Plot, path string) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("save %s: plotting failed: %v", path, v)
		}
	}()
	if err := p.Save(9*vg.Inch, 5.5*vg.Inch, path); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	return nil
}

// positive clamps values to a floor so they can sit on a log axis.
func positive(x, floor float64) float64 {
	if math.IsNaN(x) || x < floor {
		return floor
	}
	if math.IsInf(x, 1) {
		return 1e6
	}
	return x
}

func agentNames(r *Report) []string {
	var names []string
	for _, c := range r.Classes {
		if c.Kind == KindAgent {
			names = append(names, c.Name)
		}
	}
	sort.Strings(names)
	return names
}

// Column colours of the timing plot by class group.
var groupShade = map[string]color.NRGBA{
	GroupGeneric:   {R: 127, G: 127, B: 127, A: 160},
	GroupWhiteBox:  {R: 0, G: 0, B: 0, A: 190},
	GroupListing:   {R: 188, G: 189, B: 34, A: 200},
	GroupReference: {R: 23, G: 190, B: 207, A: 200},
}

// timingPlot is Figure 2: per class, the effective times of answered
// rounds (scatter; script attackers, reference brains and agents), the
// human Monte Carlo distribution, the tau line and the human lower bound,
// on a log time axis whose floor follows the fastest answer. The legend
// sits in head room above the data.
func timingPlot(r *Report) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Timing separation"
	agents := agentNames(r)
	if len(agents) == 0 {
		p.Title.Text += " (no agent configured)"
	}
	p.Y.Label.Text = "effective time per round (log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = secondTicks{}
	jitter := rand.New(rand.NewPCG(1, 2))
	rows := 0
	legend := func(label string, th ...plot.Thumbnailer) {
		p.Legend.Add(label, th...)
		rows++
	}

	// Columns: attackers and reference brains in report order, then the
	// agents, then the human model.
	var cols []Class
	for _, c := range r.Classes {
		if c.Kind == KindAttacker || c.Kind == KindReference {
			cols = append(cols, c)
		}
	}
	for _, n := range agents {
		c, _ := r.Class(n)
		cols = append(cols, c)
	}
	// The floor: a decade below the fastest positive time shown.
	minPos := math.Inf(1)
	for _, c := range cols {
		for _, t := range c.EffectiveSample {
			if t > 0 && t < minPos {
				minPos = t
			}
		}
	}
	floor := 0.01
	if !math.IsInf(minPos, 1) {
		floor = math.Max(1e-7, math.Pow(10, math.Floor(math.Log10(minPos))))
		floor = math.Min(floor, 0.01)
	}
	names := make([]string, 0, len(cols)+1)
	lo, hi := math.Inf(1), 0.0
	legendDone := map[string]bool{}
	agentIdx := 0
	for i, c := range cols {
		names = append(names, c.Name)
		pts := make(plotter.XYs, 0, len(c.EffectiveSample))
		for _, t := range c.EffectiveSample {
			y := positive(t, floor)
			pts = append(pts, plotter.XY{X: float64(i) + 0.3*(jitter.Float64()-0.5), Y: y})
			lo, hi = math.Min(lo, y), math.Max(hi, y)
		}
		if len(pts) == 0 {
			continue
		}
		s, err := plotter.NewScatter(pts)
		if err != nil {
			return nil, err
		}
		s.GlyphStyle.Radius = vg.Points(1.5)
		if c.Kind == KindAgent {
			s.GlyphStyle.Color = agentShade[agentIdx%len(agentShade)]
			s.GlyphStyle.Radius = vg.Points(2)
			agentIdx++
			p.Add(s)
			legend(fmt.Sprintf("%s (n=%d, median %s)", c.Name, c.Effective.N, fmtSecs(c.Effective.Median)), s)
			continue
		}
		s.GlyphStyle.Color = groupShade[c.Group]
		p.Add(s)
		if !legendDone[c.Group] {
			legendDone[c.Group] = true
			legend(groupLegend(r, c.Group), s)
		}
	}
	hx := float64(len(cols))
	names = append(names, "human (Monte Carlo)")
	if len(r.Human.Sample) > 0 {
		vals := make(plotter.Values, len(r.Human.Sample))
		pts := make(plotter.XYs, len(r.Human.Sample))
		for i, t := range r.Human.Sample {
			y := positive(t, floor)
			vals[i] = y
			pts[i] = plotter.XY{X: hx + 0.3*(jitter.Float64()-0.5), Y: y}
			lo, hi = math.Min(lo, y), math.Max(hi, y)
		}
		s, err := plotter.NewScatter(pts)
		if err != nil {
			return nil, err
		}
		s.GlyphStyle.Color = color.NRGBA{R: 214, G: 39, B: 40, A: 90}
		s.GlyphStyle.Radius = vg.Points(1.5)
		box, err := plotter.NewBoxPlot(vg.Points(20), hx, vals)
		if err != nil {
			return nil, err
		}
		box.BoxStyle.Color = colHuman
		p.Add(s, box)
		legend(fmt.Sprintf("human Monte Carlo (n=%d of %d, median %s)", len(vals), r.Human.Round.N, fmtSecs(r.Human.Round.Median)), s)
	}
	xmin, xmax := -0.5, hx+0.5
	if tau := r.Policy.Tau; tau > 0 {
		l, err := hline(xmin, xmax, tau, colTau, []vg.Length{vg.Points(6), vg.Points(4)})
		if err != nil {
			return nil, err
		}
		p.Add(l)
		legend(fmt.Sprintf("tau = %s", fmtSecs(tau)), l)
		lo, hi = math.Min(lo, tau), math.Max(hi, tau)
	}
	if lb := r.Human.LowerBound; lb > 0 {
		l, err := hline(xmin, xmax, lb, colHuman, []vg.Length{vg.Points(2), vg.Points(3)})
		if err != nil {
			return nil, err
		}
		p.Add(l)
		legend(fmt.Sprintf("human lower bound (Eq. 6, L=%d) = %s", r.Human.LowerBoundTokens, fmtSecs(lb)), l)
		lo, hi = math.Min(lo, lb), math.Max(hi, lb)
	}
	if math.IsInf(lo, 1) {
		lo, hi = 1, 1000
	}
	ymin := math.Max(floor, lo/2)
	ymax := math.Max(hi*2, lo*10)
	// Head room for the legend: its rows take the top of the axis, above
	// every point.
	span := math.Log10(ymax) - math.Log10(ymin)
	frac := math.Min(0.6, 0.03*float64(rows)+0.03)
	ymax = math.Pow(10, math.Log10(ymin)+span/(1-frac))
	p.Y.Min, p.Y.Max = ymin, ymax
	p.X.Min, p.X.Max = xmin, xmax
	p.NominalX(names...)
	p.X.Tick.Label.Rotation = math.Pi / 4
	p.X.Tick.Label.XAlign = text.XRight
	p.X.Tick.Label.YAlign = text.YCenter
	p.X.Tick.Label.Font.Size = vg.Points(7)
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(6)
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	return p, nil
}

// secondTicks marks every decade of a log time axis with a readable
// label ("100µs", "10ms", "100s").
type secondTicks struct{}

// Ticks implements plot.Ticker.
func (secondTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0) || !(hi > lo) || math.IsInf(hi, 0) {
		return nil
	}
	var ts []plot.Tick
	k0, k1 := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	minor := k1-k0 <= 8
	for k := k0; k <= k1 && k-k0 < 64; k++ {
		v := math.Pow(10, k)
		if v >= lo*(1-1e-9) && v <= hi*(1+1e-9) {
			ts = append(ts, plot.Tick{Value: v, Label: decadeLabel(k)})
		}
		for m := 2.0; minor && m < 10; m++ {
			if w := m * v; w > lo && w < hi {
				ts = append(ts, plot.Tick{Value: w})
			}
		}
	}
	return ts
}

// decadeLabel labels 10^k seconds.
func decadeLabel(k float64) string {
	e := int(k)
	switch {
	case e >= 4:
		return fmt.Sprintf("1e%ds", e)
	case e >= 0:
		return fmt.Sprintf("%.0fs", math.Pow(10, k))
	case e >= -3:
		return fmt.Sprintf("%.0fms", math.Pow(10, k+3))
	case e >= -6:
		return fmt.Sprintf("%.0fµs", math.Pow(10, k+6))
	default:
		return fmt.Sprintf("%.0fns", math.Pow(10, k+9))
	}
}

// groupLegend is the legend entry of an attacker or reference group.
func groupLegend(r *Report, group string) string {
	n, med := 0, []float64{}
	for _, c := range r.Classes {
		if c.Group == group {
			n++
			med = append(med, c.Effective.Median)
		}
	}
	sort.Float64s(med)
	label := map[string]string{GroupGeneric: "generic script attackers", GroupWhiteBox: "white-box attackers",
		GroupListing: "candidate-list attacker", GroupReference: "reference brains (oracle, agent-style)"}[group]
	if label == "" {
		label = group
	}
	return fmt.Sprintf("%s (%d; median of medians %s)", label, n, fmtSecs(quantile(med, 0.5)))
}

func hline(x0, x1, y float64, c color.Color, dashes []vg.Length) (*plotter.Line, error) {
	l, err := plotter.NewLine(plotter.XYs{{X: x0, Y: y}, {X: x1, Y: y}})
	if err != nil {
		return nil, err
	}
	l.LineStyle.Color = c
	l.LineStyle.Width = vg.Points(1.5)
	l.LineStyle.Dashes = dashes
	return l, nil
}

// tauPlot is Figure 3: agent pass rate and human completion probability
// against tau on a log axis, with the policy's tau and the feasible window.
func tauPlot(r *Report) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Threshold sensitivity"
	if len(r.Sweep.Agents) == 0 {
		p.Title.Text += " (no agent configured: human side only)"
	}
	p.X.Label.Text = "tau (s, log scale)"
	p.Y.Label.Text = "fraction"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min, p.Y.Max = 0, 1.02
	tau := r.Sweep.Tau
	if len(tau) < 2 {
		return nil, errors.New("sweep has fewer than two tau values")
	}
	for _, t := range tau {
		if !(t > 0) {
			return nil, fmt.Errorf("sweep tau %g is not positive", t)
		}
	}
	p.X.Min, p.X.Max = tau[0], tau[len(tau)-1]
	w := r.Window
	if w.LowerKnown && w.Exists && w.AgentMin > 0 && w.HumanMax > w.AgentMin {
		poly, err := plotter.NewPolygon(plotter.XYs{{X: w.AgentMin, Y: 0}, {X: w.HumanMax, Y: 0}, {X: w.HumanMax, Y: 1}, {X: w.AgentMin, Y: 1}})
		if err != nil {
			return nil, err
		}
		poly.Color = colWindow
		poly.LineStyle.Width = 0
		p.Add(poly)
		p.Legend.Add(fmt.Sprintf("feasible window %s-%s", fmtSecs(w.AgentMin), fmtSecs(w.HumanMax)), poly)
	}
	curve := func(ys []float64, c color.Color, dashes []vg.Length, label string) error {
		if len(ys) != len(tau) {
			return fmt.Errorf("curve %q has %d points for %d tau values", label, len(ys), len(tau))
		}
		pts := make(plotter.XYs, len(tau))
		for i := range tau {
			pts[i] = plotter.XY{X: tau[i], Y: ys[i]}
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.LineStyle.Color = c
		l.LineStyle.Width = vg.Points(2)
		l.LineStyle.Dashes = dashes
		p.Add(l)
		p.Legend.Add(label, l)
		return nil
	}
	names := make([]string, 0, len(r.Sweep.Agents))
	for n := range r.Sweep.Agents {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, n := range names {
		if err := curve(r.Sweep.Agents[n], agentShade[i%len(agentShade)], nil, "agent pass rate: "+n); err != nil {
			return nil, err
		}
	}
	if err := curve(r.Sweep.HumanRound, colHuman, nil, "human per-round completion"); err != nil {
		return nil, err
	}
	if err := curve(r.Sweep.HumanSession, colHuman, []vg.Length{vg.Points(5), vg.Points(3)}, "human per-session completion"); err != nil {
		return nil, err
	}
	if len(r.Sweep.HumanRoundLB) == len(tau) {
		if err := curve(r.Sweep.HumanRoundLB, color.NRGBA{R: 214, G: 39, B: 40, A: 120}, []vg.Length{vg.Points(1.5), vg.Points(2.5)}, "lower-bound reader per round (Eq. 6)"); err != nil {
			return nil, err
		}
	}
	if t := r.Policy.Tau; t >= tau[0] && t <= tau[len(tau)-1] {
		l, err := plotter.NewLine(plotter.XYs{{X: t, Y: 0}, {X: t, Y: 1.02}})
		if err != nil {
			return nil, err
		}
		l.LineStyle.Color = colTau
		l.LineStyle.Dashes = []vg.Length{vg.Points(6), vg.Points(4)}
		l.LineStyle.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("policy tau = %s", fmtSecs(t)), l)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(10)
	p.Legend.YOffs = -vg.Points(10)
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	p.Add(plotter.NewGrid())
	return p, nil
}

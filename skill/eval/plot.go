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

// timingPlot is Figure 2: agent effective times (scatter), the tau line,
// the human lower bound line and the human Monte Carlo distribution, on a
// log time axis.
func timingPlot(r *Report) (*plot.Plot, error) {
	const floor = 0.01
	p := plot.New()
	p.Title.Text = "Timing separation"
	agents := agentNames(r)
	if len(agents) == 0 {
		p.Title.Text += " (no agent configured: human side only)"
	}
	p.Y.Label.Text = "time per round (s, log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	jitter := rand.New(rand.NewPCG(1, 2))
	names := append([]string(nil), agents...)
	names = append(names, "human (Monte Carlo)")
	lo, hi := math.Inf(1), 0.0
	for i, n := range agents {
		c, _ := r.Class(n)
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
		s.GlyphStyle.Color = agentShade[i%len(agentShade)]
		s.GlyphStyle.Radius = vg.Points(2)
		p.Add(s)
		p.Legend.Add(fmt.Sprintf("%s (n=%d, median %s)", n, c.Effective.N, fmtSecs(c.Effective.Median)), s)
	}
	hx := float64(len(agents))
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
		box, err := plotter.NewBoxPlot(vg.Points(30), hx, vals)
		if err != nil {
			return nil, err
		}
		box.BoxStyle.Color = colHuman
		p.Add(s, box)
		p.Legend.Add(fmt.Sprintf("human Monte Carlo (n=%d of %d, median %s)", len(vals), r.Human.Round.N, fmtSecs(r.Human.Round.Median)), s)
	}
	xmin, xmax := -0.5, hx+0.5
	if tau := r.Policy.Tau; tau > 0 {
		l, err := hline(xmin, xmax, tau, colTau, []vg.Length{vg.Points(6), vg.Points(4)})
		if err != nil {
			return nil, err
		}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("tau = %s", fmtSecs(tau)), l)
		lo, hi = math.Min(lo, tau), math.Max(hi, tau)
	}
	if lb := r.Human.LowerBound; lb > 0 {
		l, err := hline(xmin, xmax, lb, colHuman, []vg.Length{vg.Points(2), vg.Points(3)})
		if err != nil {
			return nil, err
		}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("human lower bound (Eq. 6, L=%d) = %s", r.Human.LowerBoundTokens, fmtSecs(lb)), l)
		lo, hi = math.Min(lo, lb), math.Max(hi, lb)
	}
	if math.IsInf(lo, 1) {
		lo, hi = 1, 1000
	}
	p.Y.Min, p.Y.Max = math.Max(floor, lo/2), math.Max(hi*2, lo*10)
	p.X.Min, p.X.Max = xmin, xmax
	p.NominalX(names...)
	p.Legend.Top = false
	p.Legend.Left = true
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	return p, nil
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

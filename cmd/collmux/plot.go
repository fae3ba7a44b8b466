package main

import (
	"image/color"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"collmux/tune"
)

var backendColor = map[string]color.NRGBA{ // not premultiplied: shades take a lower alpha
	"nccl":   {R: 0x30, G: 0x30, B: 0x30, A: 0xff},
	"fused":  {R: 0x1f, G: 0x9e, B: 0x3a, A: 0xff},
	"staged": {R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	"mpi":    {R: 0x1f, G: 0x5f, B: 0xbf, A: 0xff},
}

// plotAll draws, per collective, time against size for every backend on
// log axes, with the size range each backend was chosen for shaded in its
// colour. It returns the files written.
func plotAll(dir string, samples []tune.Sample, ranges []tune.Range) ([]string, error) {
	byColl := map[string]map[string]plotter.XYs{}
	for _, s := range samples {
		if byColl[s.Coll] == nil {
			byColl[s.Coll] = map[string]plotter.XYs{}
		}
		byColl[s.Coll][s.Backend] = append(byColl[s.Coll][s.Backend], plotter.XY{X: float64(s.Bytes), Y: s.Micros})
	}
	var files []string
	for coll, lines := range byColl {
		p := plot.New()
		p.Title.Text = coll + ": time per call, chosen backend shaded"
		p.X.Label.Text, p.Y.Label.Text = "bytes", "µs per call"
		p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
		p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
		xmin, xmax, ymin, ymax := math.Inf(1), 0.0, math.Inf(1), 0.0
		for _, pts := range lines {
			for _, pt := range pts {
				xmin, xmax = math.Min(xmin, pt.X), math.Max(xmax, pt.X)
				ymin, ymax = math.Min(ymin, pt.Y), math.Max(ymax, pt.Y)
			}
		}
		for _, r := range ranges {
			if r.Coll != coll {
				continue
			}
			lo, hi := math.Max(float64(r.Lo), xmin), math.Min(float64(r.Hi), xmax)
			if lo >= hi {
				continue
			}
			poly, err := plotter.NewPolygon(plotter.XYs{{X: lo, Y: ymin}, {X: hi, Y: ymin}, {X: hi, Y: ymax}, {X: lo, Y: ymax}})
			if err != nil {
				return nil, err
			}
			c := backendColor[r.Backend]
			c.A = 0x30
			poly.Color, poly.LineStyle.Width = c, 0
			p.Add(poly)
		}
		for _, b := range slices.Sorted(maps.Keys(lines)) {
			pts := lines[b]
			sort.Slice(pts, func(i, j int) bool { return pts[i].X < pts[j].X })
			l, err := plotter.NewLine(pts)
			if err != nil {
				return nil, err
			}
			l.Color, l.Width = backendColor[b], vg.Points(1.5)
			p.Add(l)
			p.Legend.Add(b, l)
		}
		p.Legend.Top, p.Legend.Left = true, true
		file := filepath.Join(dir, coll+".png")
		if err := p.Save(7*vg.Inch, 4*vg.Inch, file); err != nil {
			return nil, err
		}
		files = append(files, file)
	}
	sort.Strings(files)
	return files, nil
}

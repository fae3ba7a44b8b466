package main

import (
	"cmp"
	"encoding/csv"
	"fmt"
	"image/color"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// The fused operations' benchmarks (bench/fusedops.c, bench/embedding.c,
// bench/moe.c, bench/tp.c)
// print CSV with an `op` column, shape columns, a `contender` and its `us`.
// plotOps draws the speed-up of each contender of issue 18's letters b, c
// and d over the unfused baseline a of the same shape (their names start
// "a:", "b:", ...; the parts timed alone, such as "pool-alone", are left
// out): one figure per op and value of its secondary shape column (batch),
// the primary shape (m, or the lookups) along x.

// opShape names, per op, the column along x and the column that splits
// the rows into figures ("" for one figure).
var opShape = map[string][2]string{
	"gemv_allreduce":           {"m", "batch"},
	"embedding_alltoall":       {"lookups", ""},
	"gemm_alltoall":            {"tokens", "n"},
	"gemm_reducescatter":       {"m", "n"},
	"gemm_reducescatter_torch": {"m", "n"},
	"allgather_gemm":           {"m", "n"},
	"allgather_gemm_torch":     {"m", "n"},
}

var contenderColor = []color.NRGBA{
	{R: 0x30, G: 0x30, B: 0x30, A: 0xff}, {R: 0x1f, G: 0x9e, B: 0x3a, A: 0xff}, {R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	{R: 0x1f, G: 0x5f, B: 0xbf, A: 0xff}, {R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, {R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
}

type opRow struct {
	op, x, split, contender string
	us                      float64
}

// readOpRows reads one benchmark CSV: a header line naming op, contender,
// us and the op's shape columns, then rows; repeated header lines (one run
// appended to another) are skipped.
func readOpRows(r io.Reader) ([]opRow, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	var col map[string]int
	var rows []opRow
	for line := 1; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(rec) > 0 && rec[0] == "op" {
			col = map[string]int{}
			for i, name := range rec {
				col[name] = i
			}
			continue
		}
		if col == nil {
			return nil, fmt.Errorf("line %d: a row before the header (op,...,contender,us)", line)
		}
		get := func(name string) (string, error) {
			i, ok := col[name]
			if !ok || i >= len(rec) {
				return "", fmt.Errorf("line %d: no column %q", line, name)
			}
			return rec[i], nil
		}
		op, _ := get("op")
		shape, known := opShape[op]
		if !known {
			return nil, fmt.Errorf("line %d: op %q is not one this command knows (%s)", line, op,
				strings.Join(slices.Sorted(maps.Keys(opShape)), ", "))
		}
		row := opRow{op: op}
		if row.x, err = get(shape[0]); err != nil {
			return nil, err
		}
		if shape[1] != "" {
			if row.split, err = get(shape[1]); err != nil {
				return nil, err
			}
		}
		if row.contender, err = get("contender"); err != nil {
			return nil, err
		}
		us, err := get("us")
		if err != nil {
			return nil, err
		}
		if row.us, err = strconv.ParseFloat(us, 64); err != nil || row.us <= 0 {
			return nil, fmt.Errorf("line %d: us %q is not a positive number", line, us)
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("no rows")
	}
	return rows, nil
}

// plotOps writes one PNG per op and split value into dir and returns
// their paths. Each contender's speed-up over the baseline of the same x
// is a bar; a group of bars per x.
func plotOps(dir string, rows []opRow) ([]string, error) {
	type fig struct{ op, split string }
	base := map[[3]string]float64{} // op, split, x -> the baseline's µs
	for _, r := range rows {
		if strings.HasPrefix(r.contender, "a:") {
			base[[3]string{r.op, r.split, r.x}] = r.us
		}
	}
	figs := map[fig]map[string]map[string]float64{} // contender -> x -> speed-up
	xs := map[fig][]string{}
	for _, r := range rows {
		b, ok := base[[3]string{r.op, r.split, r.x}]
		if !ok || len(r.contender) < 2 || r.contender[1] != ':' || !strings.ContainsRune("bcd", rune(r.contender[0])) {
			continue
		}
		f := fig{r.op, r.split}
		if figs[f] == nil {
			figs[f] = map[string]map[string]float64{}
		}
		if figs[f][r.contender] == nil {
			figs[f][r.contender] = map[string]float64{}
		}
		figs[f][r.contender][r.x] = b / r.us
		if !slices.Contains(xs[f], r.x) {
			xs[f] = append(xs[f], r.x)
		}
	}
	if len(figs) == 0 {
		return nil, fmt.Errorf("no contender to compare: every figure needs a baseline row (contender a:...) of the same shape")
	}
	var files []string
	for _, f := range slices.SortedFunc(maps.Keys(figs), func(a, b fig) int { return strings.Compare(a.op+a.split, b.op+b.split) }) {
		p := plot.New()
		shape := opShape[f.op]
		p.Title.Text = f.op + ": speed-up over the unfused baseline"
		if f.split != "" {
			p.Title.Text += fmt.Sprintf(" (%s %s)", shape[1], f.split)
		}
		p.X.Label.Text, p.Y.Label.Text = shape[0], "× the baseline (higher is faster)"
		x := xs[f]
		slices.SortFunc(x, func(a, b string) int { // numerically where they are numbers
			fa, ea := strconv.ParseFloat(a, 64)
			fb, eb := strconv.ParseFloat(b, 64)
			if ea == nil && eb == nil {
				return cmp.Compare(fa, fb)
			}
			return strings.Compare(a, b)
		})
		names := slices.Sorted(maps.Keys(figs[f]))
		w := vg.Points(60 / float64(len(names)+1))
		for i, name := range names {
			vals := make(plotter.Values, len(x))
			for j, xv := range x {
				vals[j] = figs[f][name][xv]
			}
			bars, err := plotter.NewBarChart(vals, w)
			if err != nil {
				return nil, err
			}
			bars.Offset = w * vg.Length(float64(i)-float64(len(names)-1)/2)
			bars.Color, bars.LineStyle.Width = contenderColor[i%len(contenderColor)], 0
			p.Add(bars)
			p.Legend.Add(name, bars)
		}
		one, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: 1}, {X: float64(len(x)) - 0.5, Y: 1}})
		if err != nil {
			return nil, err
		}
		one.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(one)
		p.NominalX(x...)
		p.Legend.Top = true
		p.Y.Min, p.Y.Max = 0, p.Y.Max*1.4 // room for the legend above the bars
		name := f.op
		if f.split != "" {
			name += "-" + shape[1] + f.split
		}
		file := filepath.Join(dir, name+".png")
		if err := p.Save(8*vg.Inch, 4*vg.Inch, file); err != nil {
			return nil, err
		}
		files = append(files, file)
	}
	return files, nil
}

func plotCmd() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:   "plot CSV...",
		Short: "Draw the fused operations' benchmark results (bench/fusedops.c, bench/embedding.c) as speed-ups over the baseline",
		Long: "plot reads the CSV the fused operations' benchmarks print and writes, per operation and batch (GEMV + " +
			"all-reduce) or for every lookup count (embedding + all-to-all), a PNG of each contender's speed-up over the " +
			"unfused baseline (contender a:) of the same shape, with 1× dashed.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var rows []opRow
			for _, name := range args {
				f, err := os.Open(name)
				if err != nil {
					return err
				}
				r, err := readOpRows(f)
				f.Close()
				if err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				rows = append(rows, r...)
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			files, err := plotOps(dir, rows)
			for _, f := range files {
				fmt.Fprintln(cmd.OutOrStdout(), f)
			}
			return err
		},
	}
	c.Flags().StringVarP(&dir, "out", "o", ".", "directory for the PNGs")
	return c
}

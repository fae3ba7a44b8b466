package main

import (
	"encoding/binary"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/spf13/cobra"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// `collmux power` runs a command (a benchmark under mpirun, a training
// step) and samples every GPU's power draw and total-energy counter
// through NVML while it runs: what a run of collectives costs in power,
// beside the per-call energy the statistics give (issue 19). It writes the
// samples as CSV and a plot of power over the run, and says each GPU's
// mean and peak power and its energy over the run.

// gpuMeter reads the GPUs' power: NVML on a GPU machine.
type gpuMeter interface {
	Count() int
	// Read gives GPU i's power draw (mW) and its energy counter (mJ since
	// the driver loaded).
	Read(i int) (mw uint32, mj uint64, err error)
	Close()
}

type nvmlMeter struct{ devs []nvml.Device }

func openNVMLMeter() (gpuMeter, error) {
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML: %s (no NVIDIA driver here?)", nvml.ErrorString(ret))
	}
	n, ret := nvml.DeviceGetCount()
	m := &nvmlMeter{}
	for i := 0; ret == nvml.SUCCESS && i < n; i++ {
		var d nvml.Device
		if d, ret = nvml.DeviceGetHandleByIndex(i); ret == nvml.SUCCESS {
			m.devs = append(m.devs, d)
		}
	}
	if ret != nvml.SUCCESS || len(m.devs) == 0 {
		nvml.Shutdown()
		return nil, fmt.Errorf("NVML: no GPU to read (%s)", nvml.ErrorString(ret))
	}
	return m, nil
}

func (m *nvmlMeter) Count() int { return len(m.devs) }

// Read gives the instantaneous power where the driver has it (NVML's
// power usage is averaged over about a second on recent GPUs, which turns
// a run of short phases into a staircase), else that average.
func (m *nvmlMeter) Read(i int) (uint32, uint64, error) {
	fv := []nvml.FieldValue{{FieldId: nvml.FI_DEV_POWER_INSTANT}}
	mw, ret := uint32(0), m.devs[i].GetFieldValues(fv)
	if ret == nvml.SUCCESS && fv[0].NvmlReturn == uint32(nvml.SUCCESS) && fv[0].ValueType == uint32(nvml.VALUE_TYPE_UNSIGNED_INT) {
		mw = binary.LittleEndian.Uint32(fv[0].Value[:4])
	} else if mw, ret = m.devs[i].GetPowerUsage(); ret != nvml.SUCCESS {
		return 0, 0, fmt.Errorf("NVML power of GPU %d: %s", i, nvml.ErrorString(ret))
	}
	mj, ret := m.devs[i].GetTotalEnergyConsumption()
	if ret != nvml.SUCCESS {
		return 0, 0, fmt.Errorf("NVML energy of GPU %d: %s", i, nvml.ErrorString(ret))
	}
	return mw, mj, nil
}

func (m *nvmlMeter) Close() { nvml.Shutdown() }

// powerSample is one reading: seconds since the command started, the GPU,
// its power (W) and its energy since the first reading (J).
type powerSample struct {
	T    float64
	GPU  int
	W, J float64
}

func powerCmd() *cobra.Command {
	var prefix string
	var every time.Duration
	c := &cobra.Command{
		Use:   "power [-o PREFIX] [--every D] -- COMMAND [ARGS...]",
		Short: "run a command and record every GPU's power over it (PREFIX.csv, PREFIX.png)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := openNVMLMeter()
			if err != nil {
				return err
			}
			defer m.Close()
			return runPower(m, every, prefix, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	c.Flags().StringVarP(&prefix, "output", "o", "power", "where the samples go: PREFIX.csv and PREFIX.png")
	c.Flags().DurationVar(&every, "every", 20*time.Millisecond, "time between readings (NVML's power moves every few tens of ms)")
	return c
}

// runPower runs args, reading m every `every` until the command ends,
// then writes the samples and the plot and prints each GPU's summary. The
// command's own failure is the result, after the files are written.
func runPower(m gpuMeter, every time.Duration, prefix string, args []string, out, errw io.Writer) error {
	if every < time.Millisecond {
		return fmt.Errorf("--every %v: at least 1ms", every)
	}
	run := exec.Command(args[0], args[1:]...)
	run.Stdin, run.Stdout, run.Stderr = os.Stdin, out, errw
	t0 := time.Now()
	if err := run.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- run.Wait() }()
	first, seen := make([]uint64, m.Count()), make([]bool, m.Count())
	var samples []powerSample
	var readErr error
	tick := time.NewTicker(every)
	defer tick.Stop()
	read := func() {
		t := time.Since(t0).Seconds()
		for i := 0; i < m.Count(); i++ {
			mw, mj, err := m.Read(i)
			if err != nil {
				readErr = err
				continue
			}
			if !seen[i] {
				first[i], seen[i] = mj, true
			}
			samples = append(samples, powerSample{T: t, GPU: i, W: float64(mw) / 1e3, J: float64(mj-first[i]) / 1e3})
		}
	}
	read()
	var runErr error
	for running := true; running; {
		select {
		case runErr = <-done:
			running = false
		case <-tick.C:
		}
		read()
	}
	if len(samples) == 0 {
		return errors.Join(fmt.Errorf("no power reading succeeded"), readErr, runErr)
	}
	if err := writePowerCSV(prefix+".csv", samples); err != nil {
		return err
	}
	if err := plotPower(prefix+".png", samples, m.Count()); err != nil {
		return err
	}
	fmt.Fprintf(out, "collmux power: %d readings over %.2f s in %s.csv and %s.png\n", len(samples), time.Since(t0).Seconds(), prefix, prefix)
	for i := 0; i < m.Count(); i++ {
		var n int
		var sum, peak, joules float64
		for _, s := range samples {
			if s.GPU == i {
				n, sum, peak, joules = n+1, sum+s.W, max(peak, s.W), s.J
			}
		}
		if n > 0 {
			fmt.Fprintf(out, "  GPU %d: mean %.0f W, peak %.0f W, %.1f J\n", i, sum/float64(n), peak, joules)
		}
	}
	if readErr != nil {
		fmt.Fprintln(errw, "collmux power: some readings failed:", readErr)
	}
	return runErr
}

func writePowerCSV(file string, samples []powerSample) error {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"seconds", "gpu", "watts", "joules"})
	for _, s := range samples {
		w.Write([]string{strconv.FormatFloat(s.T, 'f', 3, 64), strconv.Itoa(s.GPU), strconv.FormatFloat(s.W, 'f', 1, 64),
			strconv.FormatFloat(s.J, 'f', 3, 64)})
	}
	w.Flush()
	return errors.Join(w.Error(), f.Close())
}

func plotPower(file string, samples []powerSample, gpus int) error {
	p := plot.New()
	p.Title.Text = "GPU power over the run"
	p.X.Label.Text, p.Y.Label.Text = "seconds", "watts"
	for i := 0; i < gpus; i++ {
		var pts plotter.XYs
		for _, s := range samples {
			if s.GPU == i {
				pts = append(pts, plotter.XY{X: s.T, Y: s.W})
			}
		}
		if len(pts) == 0 {
			continue
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = contenderColor[i%len(contenderColor)]
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("GPU %d", i), l)
	}
	p.Legend.Top = true
	return p.Save(8*vg.Inch, 4*vg.Inch, file)
}

package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"collmux/fused"
	"collmux/topo"
	"collmux/topo/nvlink"
	"collmux/tune"
)

func checkCmd() *cobra.Command {
	o := tuneOpts{}
	var table string
	var tolerance float64
	c := &cobra.Command{
		Use:   "check --table tuning.json",
		Short: "Check a tuning table against every backend alone, measured in one run",
		Long: "check runs bench/gpu_bench once under mpirun with the tuned policy (the defaults and the table) and every backend " +
			"forced alone, taking turns at each size, and prints per collective how the table does: its worst ratio to the " +
			"best backend alone, the sizes within --tolerance, the sizes where it takes the path that was fastest alone " +
			"(there the ratio is the run's noise), and summed times. With --from-csv it reads such a run recorded earlier.",
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := tune.Read(table)
			if err != nil {
				return err
			}
			if o.np == 0 { // one rank per GPU
				nv := topo.SystemNVML()
				o.np = len(nvlink.Read(nv).GPUs)
				topo.Shutdown(nv)
			}
			var samples []tune.Sample
			if len(o.fromCSV) > 0 {
				if samples, err = readCSVs(o.fromCSV, gpuBenchCSV(policyOf)); err != nil {
					return err
				}
			} else {
				abs, err := filepath.Abs(table)
				if err != nil {
					return err
				}
				samples, err = measure(cmd, o, []string{tune.Tuned}, "COLLMUX_TUNING="+abs)
				if err == errDryRun {
					return nil
				}
				if err != nil {
					return err
				}
			}
			ranks := max(o.np, 1)
			cs := tune.Check(t, samples, tolerance, func(b, c string, n uint64) bool { return fused.Serves(b, c, n, ranks) }, "nccl")
			if len(cs) == 0 {
				return fmt.Errorf("no size was measured both under the tuned policy and with a backend alone")
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Table %s (GPU key %s), %d ranks.\n\n", table, t.GPUKey, ranks)
			tune.WriteCheck(cmd.OutOrStdout(), cs, tolerance)
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&table, "table", "", "the tuning table to check")
	c.MarkFlagRequired("table")
	f.Float64Var(&tolerance, "tolerance", 0.02, "how far above the best backend alone the table may be at a size")
	benchFlags(c, &o)
	return c
}

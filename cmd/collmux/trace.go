// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"collmux/trace"
)

func traceCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "trace",
		Short: "Work with the timelines COLLMUX_TRACE writes",
	}
	c.AddCommand(&cobra.Command{
		Use:   "merge OUT FILES...",
		Short: "Join per-rank timelines into one trace (ranks as processes, events by time)",
		Long: "merge reads the files COLLMUX_TRACE=path wrote (path.<rank>.json, Chrome's Trace Event Format) and writes " +
			"OUT, one trace for Perfetto or chrome://tracing: each rank a process, every event in time order. The ranks' " +
			"clocks were aligned at MPI_Init, so the events need no shifting. A rank given twice is an error. OUT is made " +
			"0600 and a symbolic link there is not followed.",
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := trace.MergeFiles(args[0], args[1:])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %d events of %d ranks\n", args[0], len(m.TraceEvents), len(m.OtherData.Merged))
			if m.OtherData.Dropped > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "%d calls were not recorded (a rank's buffer was full)\n", m.OtherData.Dropped)
			}
			return nil
		},
	})
	return c
}

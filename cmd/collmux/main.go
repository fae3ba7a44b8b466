// Command collmux is collmux's tool: it shows the machine as collmux sees
// it (topo), the routing table in force (routes), measures the machine to
// write a tuning table (tune), checks a table against every backend
// alone (check), and shows the versions (version, --version) and every
// setting with its source (info); it also draws benchmark results (plot,
// trace) and records the GPUs' power over a command (power).
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"collmux/dispatch"
	"collmux/topo"
	"collmux/topo/nvlink"
)

func main() {
	dispatch.GPUKey = func() string {
		nv := topo.SystemNVML()
		defer topo.Shutdown(nv)
		return nvlink.Read(nv).Key()
	}
	if err := root().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "collmux:", err)
		os.Exit(1)
	}
}

func root() *cobra.Command {
	c := &cobra.Command{
		Use:           "collmux",
		Short:         "collmux routes MPI collectives to MPI, NCCL or its own GPU kernels",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		// Not cobra's own --version, which prints one template: this
		// looks for the library and reads it, as `collmux version` does.
		RunE: func(cmd *cobra.Command, args []string) error {
			if v, _ := cmd.Flags().GetBool("version"); v {
				writeVersion(cmd.OutOrStdout())
				return nil
			}
			return cmd.Help()
		},
	}
	c.Flags().Bool("version", false, "show the versions, as collmux version does")
	c.AddCommand(topoCmd(), routesCmd(), tuneCmd(), checkCmd(), versionCmd(), infoCmd(), traceCmd(), plotCmd(), powerCmd())
	return c
}

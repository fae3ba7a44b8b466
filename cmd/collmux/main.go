// Command collmux is collmux's tool: it shows the machine as collmux sees
// it (topo), the routing table in force (routes), measures the machine to
// write a tuning table (tune), and checks a table against every backend
// alone (check).
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
	}
	c.AddCommand(topoCmd(), routesCmd(), tuneCmd(), checkCmd())
	return c
}

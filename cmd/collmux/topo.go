package main

import (
	"encoding/json"

	"github.com/spf13/cobra"

	"collmux/topo"
)

func topoCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "topo",
		Short: "Show the GPUs, NVLinks, CPU, NCCL and MPI of this machine and its fingerprint",
		RunE: func(cmd *cobra.Command, args []string) error {
			nv := topo.SystemNVML()
			defer topo.Shutdown(nv)
			m := topo.Probe(nv)
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(m)
			}
			return m.WriteTable(cmd.OutOrStdout())
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

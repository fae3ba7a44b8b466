package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"collmux/dispatch"
	"collmux/internal/units"
	"collmux/topo"
	"collmux/topo/nvlink"
)

func routesCmd() *cobra.Command {
	var shape dispatch.Shape
	var nvl string
	c := &cobra.Command{
		Use:   "routes",
		Short: "Show where each collective goes, by memory kind and size, under the current environment",
		Long: "routes compiles the rules collmux would use in a process started with this environment " +
			"(built-in defaults, the tuning table, COLLMUX_RULES) and prints them with the rule behind each range, " +
			"after the tuning table in force and where it came from (COLLMUX_TUNING, the user's folder or the system folder).",
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, warns, err := loadConfig()
			if err != nil {
				return err
			}
			for _, w := range warns {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
			}
			if shape.RanksPerNode == 0 {
				shape.RanksPerNode = (shape.Ranks + shape.Nodes - 1) / shape.Nodes
			}
			if nvl == "" { // this machine's
				nv := topo.SystemNVML()
				shape.NVLink = nvlink.Read(nv).Class()
				topo.Shutdown(nv)
			} else if k := slices.Index(nvlink.ClassNames[:], nvl); k >= 0 {
				shape.NVLink = nvlink.Class(k)
			} else {
				return fmt.Errorf("--nvlink %q: want none, partial or full", nvl)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Tuning table: %s\n\n", tuningInForce(cfg, os.Getenv))
			blocking := dispatch.CompileMode(cfg.Rules, shape, dispatch.Mode{})
			if err := printRoutes(out, cfg.Rules, &blocking, nil); err != nil {
				return err
			}
			for _, m := range dispatch.Modes()[1:] {
				rt := dispatch.CompileMode(cfg.Rules, shape, m)
				if reflect.DeepEqual(blocking, rt) {
					continue
				}
				fmt.Fprintf(out, "\n%s calls%s, where their routes differ (form= and overlap= rules):\n", m.Form, overlapTitle[m.Overlap])
				if err := printRoutes(out, cfg.Rules, &rt, &blocking); err != nil {
					return err
				}
			}
			return nil
		},
	}
	c.Flags().IntVar(&shape.Ranks, "ranks", 2, "communicator size, for rules with ranks=")
	c.Flags().IntVar(&shape.Nodes, "nodes", 1, "nodes the communicator spans, for rules with nodes=")
	c.Flags().IntVar(&shape.RanksPerNode, "rpn", 0, "most ranks on one node, for rules with rpn= (default ranks/nodes)")
	c.Flags().StringVar(&nvl, "nvlink", "", "how far NVLink joins each node's GPUs (none, partial, full), for rules with nvlink= (default: this machine's)")
	return c
}

var overlapTitle = [...]string{"", " beside computation (COLLMUX_OVERLAP, the collmux_overlap info key)"}

// lowBound prints a range's first size; one past a round size reads as
// "4M+1" rather than 4194305.
// printRoutes writes a route table; with unlike, only the cells that
// differ from it.
func printRoutes(w io.Writer, rules []dispatch.Rule, rt, unlike *dispatch.Routes) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "collective\tmemory\tdtype\tbytes\tbackend\trule")
	for c := dispatch.Coll(0); c < dispatch.NumColl; c++ {
		if !c.Collective() {
			continue // point-to-point and Reduce_local: MPI on host memory, staged on device memory, whatever the rules
		}
		for m := dispatch.Mem(0); m < dispatch.NumMem; m++ {
			if unlike != nil && reflect.DeepEqual(rt[c][m], unlike[c][m]) {
				continue
			}
			// one block for all datatype classes unless rules tell them apart
			classes := []dispatch.DClass{dispatch.DInt, dispatch.DFloat, dispatch.DOther}
			same := reflect.DeepEqual(rt[c][m][0], rt[c][m][1]) && reflect.DeepEqual(rt[c][m][0], rt[c][m][2])
			if same {
				classes = classes[:1]
			}
			for _, d := range classes {
				dname := d.String()
				if same {
					dname = "*"
				}
				for _, r := range rt[c][m][d] {
					hi := "inf"
					if r.Hi != math.MaxUint64 {
						hi = units.Bytes(r.Hi)
					}
					rule := "-"
					if r.Rule >= 0 {
						rule = rules[r.Rule].String()
					}
					fmt.Fprintf(tw, "%v\t%v\t%s\t%s-%s\t%v\t%s\n", c, m, dname, lowBound(r.Lo), hi, r.Backend, rule)
				}
			}
		}
	}
	return tw.Flush()
}

func lowBound(n uint64) string {
	if n > 1 {
		if h := units.Bytes(n - 1); h != fmt.Sprint(n-1) {
			return h + "+1"
		}
	}
	return units.Bytes(n)
}

// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"collmux/dispatch"
)

func infoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "info",
		Short: "Show every COLLMUX_* setting with its value and source, the routing rules in force, and suspicious variables",
		Long: "info prints the versions (as collmux version does), then every COLLMUX_* variable with the value a process " +
			"started with this environment would use and where that value comes from (default or environment), then the " +
			"rules in the order they apply (built-in defaults, the tuning table, COLLMUX_RULES; later ones win), then " +
			"warnings: COLLMUX_* variables collmux does not know, with the closest known name. A value the library would " +
			"refuse at start-up makes info fail, naming it.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			writeVersion(out)
			fmt.Fprintln(out)
			if err := writeSettings(out, os.Getenv); err != nil {
				return err
			}
			cfg, warns, err := loadConfig()
			if err == nil {
				fmt.Fprintln(out)
				err = writeRules(out, cfg, os.Getenv)
			}
			if len(warns) > 0 {
				fmt.Fprintln(out, "\nWarnings:")
				for _, w := range warns {
					fmt.Fprintln(out, "  "+w)
				}
			}
			return err
		},
	}
}

// loadConfig is the configuration a process started with this environment
// would have, and warnings about it: COLLMUX_* variables collmux does not
// read (a misspelt name leaves its setting at the default without a word
// from the library) and the library's own (a tuning table measured on
// another machine).
func loadConfig() (dispatch.Config, []string, error) {
	warns := dispatch.UnknownVars(os.Environ())
	cfg, err := dispatch.LoadConfig(os.Getenv)
	return cfg, append(warns, cfg.Warnings...), err
}

// writeSettings lists dispatch.Vars in the manner of ompi_info and
// ucc_info -c: name, value, where the value comes from, what it does.
// Unset and empty are alike: the library reads both as the default.
func writeSettings(w io.Writer, getenv func(string) string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "variable\tvalue\tsource\tmeaning")
	for _, v := range dispatch.Vars {
		value, source := getenv(v.Name), "environment"
		if value == "" {
			value, source = v.Default, "default"
		}
		if value == "" {
			value = "-"
		}
		if !v.Library {
			source += ", not read by the library"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", v.Name, value, source, v.Help)
	}
	return tw.Flush()
}

// tuningInForce says which tuning table is in force and where it came
// from (COLLMUX_TUNING, the user's folder, the system folder), or why there
// is none.
func tuningInForce(cfg dispatch.Config, getenv func(string) string) string {
	switch {
	case cfg.Tuning != "":
		return cfg.Tuning + " (from " + cfg.TuningFrom + ")"
	case getenv("COLLMUX_TUNING") != "":
		return "none: COLLMUX_TUNING's table is not used (see Warnings)"
	}
	none := "none: COLLMUX_TUNING is unset and no table for this machine's GPU key is installed in " + strings.Join(dispatch.TuningDirs(getenv), " or ")
	for _, w := range cfg.Warnings {
		if strings.Contains(w, "tuning table") {
			return none + " that collmux may use (see Warnings)"
		}
	}
	return none
}

// writeRules lists the rules in the order they apply, each with its
// source, after a line saying where the tuning table came from.
func writeRules(w io.Writer, cfg dispatch.Config, getenv func(string) string) error {
	tuning := tuningInForce(cfg, getenv)
	fmt.Fprintf(w, "Tuning table: %s\nRules, later ones winning: %d built-in, %d from the tuning table, %d from COLLMUX_RULES\n",
		tuning, len(dispatch.DefaultRules()), cfg.UserFrom-len(dispatch.DefaultRules()), len(cfg.Rules)-cfg.UserFrom)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range cfg.Rules {
		fmt.Fprintf(tw, "  %s\t%s\n", r.Text, r.Source)
	}
	if err := tw.Flush(); err != nil || len(cfg.Ops) == 0 {
		return err
	}
	fmt.Fprintln(w, "Forms of the fused operations from the tuning table (COLLMUX_OPS_ALGO=auto; the first that holds a call):")
	for _, r := range cfg.Ops {
		hi := "inf"
		if r.Hi != math.MaxUint64 {
			hi = fmt.Sprint(r.Hi)
		}
		fmt.Fprintf(w, "  %s, %d ranks, batch %d-%d, m %d-%s: %s\n", r.Op, r.Ranks, r.BatchLo, r.BatchHi, r.Lo, hi, r.Form)
	}
	return nil
}

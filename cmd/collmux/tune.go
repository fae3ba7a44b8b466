package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"collmux/dispatch"
	"collmux/fused"
	"collmux/internal/units"
	"collmux/topo"
	"collmux/tune"
)

type tuneOpts struct {
	np                 int
	mpirun, bench, lib string
	mpicc, cuda, nccl  string // building the benchmark
	backends           []string
	maxBytes, stgMax   string
	fusedMax           string
	margin             float64
	out, plots         string
	install, system    bool
	launcher           string
	dryRun             bool
	fromCSV            []string
	saveCSV            string
	gpuKey             string
	// tune --overlap: each backend beside a reference GEMM stream
	overlap                       bool
	overlapBench, overlapMax      string
	overlapBackends, overlapColls []string
	overlapCSV                    []string
	saveOverlapCSV                string
	// tune --ops: the forms of the fused operations
	ops               bool
	opsBench, opsMaxM string
	opsCSV            []string
	saveOpsCSV        string
}

func tuneCmd() *cobra.Command {
	o := tuneOpts{}
	c := &cobra.Command{
		Use:   "tune",
		Short: "Measure every backend on this machine and write a tuning table",
		Long: "tune runs the device-collective benchmark (bench/gpu_bench) under mpirun once, every backend " +
			"forced alone in turn at each size, picks the fastest backend per collective and size " +
			"(keeping the previous choice while it is within --margin), and writes a tuning table and one plot per collective. " +
			"With --from-csv it reads sweeps recorded earlier instead of running them. With --overlap it also runs " +
			"bench/overlap, each of --overlap-backends beside a reference GEMM stream, and adds rules for overlap mode " +
			"(overlap=yes): the fastest backend that keeps the GEMMs and itself near their speed alone, else the one that slows the GEMMs least.",
		RunE: func(cmd *cobra.Command, args []string) error { return runTune(cmd, o) },
	}
	f := c.Flags()
	benchFlags(c, &o)
	f.Float64Var(&o.margin, "margin", 0.05, "keep the previous winner while within this fraction of the best")
	f.StringVar(&o.out, "out", "", "tuning table to write (default tuning-<gpu key>.json)")
	f.BoolVar(&o.install, "install", false, "also install the table where collmux finds it by itself (the user's folder)")
	f.BoolVar(&o.system, "system", false, "with --install: install it for every user of this machine, in COLLMUX_TUNING_DIR or "+dispatch.DefaultSystemTuningDir+" (run as root)")
	f.StringVar(&o.plots, "plots", ".", "directory for the plots (<collective>.png)")
	f.StringVar(&o.gpuKey, "gpu-key", "", "GPU key of the machine the CSV files were measured on (with --from-csv)")
	f.BoolVar(&o.overlap, "overlap", false, "also measure each of --overlap-backends beside a reference GEMM stream (bench/overlap) and add rules for overlap mode (overlap=yes)")
	f.StringVar(&o.overlapBench, "overlap-bench", "", "the bench/overlap binary (default: built at first use, as --bench)")
	f.StringSliceVar(&o.overlapBackends, "overlap-backends", []string{"copy", "fused", "nccl"}, "backends to measure beside the GEMMs")
	f.StringSliceVar(&o.overlapColls, "overlap-collectives", []string{"allreduce", "allgather", "alltoall", "reduce_scatter"}, "collectives to measure beside the GEMMs")
	f.StringVar(&o.overlapMax, "overlap-max-bytes", "256M", "largest message beside the GEMMs")
	f.StringSliceVar(&o.overlapCSV, "overlap-csv", nil, "read recorded bench/overlap CSV files (path column via-<backend>) instead of measuring beside the GEMMs")
	f.StringVar(&o.saveOverlapCSV, "save-overlap-csv", "", "also write the measurements beside the GEMMs (bench/overlap's CSV) to this file")
	f.BoolVar(&o.ops, "ops", false, "also time every form of the fused GEMV + all-reduce (bench/fusedops) and record the fastest per batch and m, which COLLMUX_OPS_ALGO=auto then takes")
	f.StringVar(&o.opsBench, "ops-bench", "", "the bench/fusedops binary (default: built at first use, as --bench)")
	f.StringVar(&o.opsMaxM, "ops-max-m", "28672", "largest m (rows) of the GEMV timed")
	f.StringSliceVar(&o.opsCSV, "ops-csv", nil, "read recorded bench/fusedops CSV files (contenders d:<form>) instead of timing the forms")
	f.StringVar(&o.saveOpsCSV, "save-ops-csv", "", "also write the forms' times (bench/fusedops's CSV) to this file")
	return c
}

// benchFlags are the flags of the commands that run bench/gpu_bench (tune
// and check).
func benchFlags(c *cobra.Command, o *tuneOpts) {
	f := c.Flags()
	f.IntVar(&o.np, "np", 0, "ranks (default: the number of GPUs)")
	f.StringVar(&o.mpirun, "mpirun", "mpirun", "MPI launcher, Open MPI's or MPICH's (as its --version tells)")
	f.StringVar(&o.launcher, "launcher", "", launcherHelp)
	f.BoolVar(&o.dryRun, "dry-run", false, "print the command line that would run the benchmark, and stop")
	f.StringVar(&o.bench, "bench", "", "the gpu_bench binary (default: built at first use from the source installed with the tool, into the user's cache)")
	f.StringVar(&o.mpicc, "mpicc", "", "the MPI compiler wrapper that builds the benchmark (default: the one beside --mpirun with its suffix, else mpicc)")
	f.StringVar(&o.cuda, "cuda", cudaHome(), "the CUDA toolkit the benchmark is built against ($CUDA_HOME, $CUDA_PATH or /usr/local/cuda)")
	f.StringVar(&o.nccl, "nccl", os.Getenv("NCCL_HOME"), "where NCCL's include and lib folders are, if not with CUDA or the system's ($NCCL_HOME)")
	f.StringVar(&o.lib, "lib", "", "libcollmux.so to preload (default: $COLLMUX_LIB, else the one of the tool's installation or build tree)")
	f.StringSliceVar(&o.backends, "backends", []string{"nccl", "fused", "staged"}, "backends to measure")
	f.StringVar(&o.maxBytes, "max-bytes", "1G", "largest message")
	f.StringVar(&o.stgMax, "staged-max-bytes", "64M", "largest message for the (slow) staged path")
	f.StringVar(&o.fusedMax, "fused-max-bytes", "", "largest message to time the fused kernels at (default: what their workspace holds of an all-gather, 8 MiB a rank); sizes a collective's kernel cannot take are dropped")
	f.StringSliceVar(&o.fromCSV, "from-csv", nil, "read recorded gpu_bench CSV files instead of measuring")
	f.StringVar(&o.saveCSV, "save-csv", "", "also write the measurements (gpu_bench's CSV) to this file")
}

// backendOf maps gpu_bench's path column to a backend: "via-X" is collmux
// forced to X; in recorded results "nccl" is NCCL called directly and
// "fused"/"staged" collmux forced to them.
func backendOf(path string) string {
	if b, ok := strings.CutPrefix(path, "via-"); ok {
		return b
	}
	switch path {
	case "nccl", "fused", "staged":
		return path
	}
	return ""
}

func runTune(cmd *cobra.Command, o tuneOpts) error {
	if o.system && !o.install {
		return fmt.Errorf("--system goes with --install")
	}
	nv := topo.SystemNVML()
	defer topo.Shutdown(nv)
	m := topo.Probe(nv)
	if o.np == 0 {
		o.np = len(m.GPUs) // ranks: one per GPU
	}
	var samples []tune.Sample
	if len(o.fromCSV) > 0 {
		s, err := readCSVs(o.fromCSV, gpuBenchCSV(backendOf))
		if err != nil {
			return err
		}
		samples = s
		if o.gpuKey != "" {
			m.GPUKey, m.Fingerprint = o.gpuKey, ""
		}
	} else {
		s, err := measure(cmd, o, nil)
		if err == errDryRun {
			if o.overlap && len(o.overlapCSV) == 0 { // their command lines too
				if _, err = measureOverlap(cmd, o); err != errDryRun {
					return err
				}
			}
			if o.ops && len(o.opsCSV) == 0 {
				_, err = measureOps(cmd, o)
			}
			return unlessDry(err)
		}
		if err != nil {
			return err
		}
		samples = s
	}
	serves := servesOn(max(o.np, 1))
	samples = tune.Merge(samples, serves)
	if len(samples) == 0 {
		return fmt.Errorf("no measurements")
	}
	ranges := tune.Choose(samples, o.margin, "nccl")
	t := tune.Table{Version: tune.TableVersion, Date: time.Now().UTC(), GPUKey: m.GPUKey, Fingerprint: m.Fingerprint,
		Margin: o.margin, Rules: tune.Rules(ranges, ""), Ranges: ranges, Samples: samples}
	if o.overlap || len(o.overlapCSV) > 0 {
		s, err := samplesOf(o.overlapCSV, overlapCSV, func() ([]tune.OverlapSample, error) { return measureOverlap(cmd, o) })
		if err != nil {
			return unlessDry(err)
		}
		t.OverlapSamples = tune.MergeOverlap(s, serves)
		if len(t.OverlapSamples) == 0 {
			return fmt.Errorf("no measurements beside the GEMMs")
		}
		t.OverlapRanges = tune.ChooseOverlap(t.OverlapSamples, o.margin)
		t.Rules = append(t.Rules, tune.Rules(t.OverlapRanges, ":overlap=yes")...)
		overlapReport(cmd.OutOrStdout(), t.OverlapSamples)
	}
	if o.ops || len(o.opsCSV) > 0 {
		var err error
		if t.OpsSamples, err = samplesOf(o.opsCSV, opsCSV, func() ([]tune.OpsSample, error) { return measureOps(cmd, o) }); err != nil {
			return unlessDry(err)
		}
		if len(t.OpsSamples) == 0 {
			return fmt.Errorf("no times of the fused operations' forms")
		}
		t.Ops = tune.ChooseOps(t.OpsSamples, o.margin)
		if err := dispatch.CheckOps("the forms chosen", t.Ops); err != nil { // what the library would refuse to start with
			return err
		}
		for _, r := range t.Ops {
			fmt.Fprintf(cmd.OutOrStdout(), "   %s, %d ranks, batch %d-%d, m from %d: %s\n", r.Op, r.Ranks, r.BatchLo, r.BatchHi, r.Lo, r.Form)
		}
	}
	if _, err := dispatch.ParseRules(t.RuleString(), "tune"); err != nil {
		return fmt.Errorf("internal error, the chosen rules do not parse: %v", err)
	}
	out := o.out
	if out == "" {
		out = "tuning-" + m.GPUKey + ".json"
	}
	if err := t.Write(out); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (%d rules for GPU key %s)\n", out, len(t.Rules), t.GPUKey)
	for _, r := range t.Rules {
		fmt.Fprintln(cmd.OutOrStdout(), "  ", r)
	}
	switch {
	case o.install && o.system:
		dst, err := installSystem(cmd, t)
		if err != nil {
			return fmt.Errorf("--install --system: %v", err)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "installed %s for every user\n", dst)
	case o.install:
		dir := dispatch.TuningDir(os.Getenv)
		if dir == "" {
			return fmt.Errorf("--install: neither HOME nor XDG_CONFIG_HOME is set (to an absolute path), so there is no tuning folder; give the table with COLLMUX_TUNING instead")
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		dst := filepath.Join(dir, "tuning-"+m.GPUKey+".json")
		if err := t.Write(dst); err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "installed %s\n", dst)
	}
	files, err := plotAll(o.plots, samples, ranges)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "plots: %s\n", strings.Join(files, " "))
	return nil
}

// measure runs gpu_bench once under mpirun, every backend forced alone as
// a policy and measured in turn at each size (so that they compare within
// one run, not across runs), after the policies given first (with env for
// the ranks), with a progress bar fed by the benchmark's output lines.
// Samples carry the backend, or the name of a policy given first. The
// ranks are started by --launcher, or --mpirun with its MPI's flags; with
// --dry-run, measure prints that command line and returns errDryRun.
func measure(c *cobra.Command, o tuneOpts, first []string, env ...string) ([]tune.Sample, error) {
	log := c.ErrOrStderr()
	lib, err := benchSetup(c, &o, "gpu_bench", &o.bench)
	if err != nil {
		return nil, err
	}
	maxBytes, alone, err := sweepPolicies(o)
	if err != nil {
		return nil, err
	}
	var policies []benchPolicy
	for _, name := range first {
		policies = append(policies, benchPolicy{name, "", maxBytes})
	}
	policies = append(policies, alone...)
	prog := []string{o.bench, fmt.Sprint(maxBytes)}
	for _, p := range policies {
		prog = append(prog, p.arg())
	}
	l, err := launcherOf(c, o)
	if err != nil {
		return nil, err
	}
	argv, err := l.render(o.np, append([]string{"LD_PRELOAD=" + lib, "NCCL_NVLS_ENABLE=0"}, env...), prog)
	if err != nil {
		return nil, err
	}
	if o.dryRun {
		fmt.Fprintln(c.OutOrStdout(), shellQuote(argv))
		return nil, errDryRun
	}
	bar := progressbar.NewOptions(expectedLines(maxBytes, policies), progressbar.OptionSetWriter(log),
		progressbar.OptionSetDescription("measuring "+strings.Join(o.backends, ", ")), progressbar.OptionShowCount(), progressbar.OptionClearOnFinish())
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "NCCL_NVLS_ENABLE=0", "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var csv bytes.Buffer
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		csv.WriteString(sc.Text() + "\n")
		bar.Add(1)
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("%s: %v\n%s", shellQuote(argv), err, errb.String())
	}
	bar.Finish()
	if o.saveCSV != "" {
		if err := os.WriteFile(o.saveCSV, csv.Bytes(), 0o644); err != nil {
			return nil, err
		}
	}
	s, err := tune.ReadCSV(&csv, policyOf)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "%d measurements\n", len(s))
	return s, nil
}

// benchSetup is what a benchmark run needs: ranks, the library to preload
// (absolute), and the benchmark bench/<name>.c, *bin where given, else
// built at first use (under --dry-run its build command is printed).
func benchSetup(c *cobra.Command, o *tuneOpts, name string, bin *string) (string, error) {
	if o.np < 1 {
		return "", fmt.Errorf("no GPU found; give --np")
	}
	lib := o.lib
	if lib == "" {
		var tried []string
		if lib, tried = findLib(os.Getenv); lib == "" {
			return "", fmt.Errorf("give --lib: libcollmux.so is not where the tool looks (%s)", strings.Join(tried, ", "))
		}
	}
	lib, err := filepath.Abs(lib)
	if err != nil {
		return "", err
	}
	if *bin == "" {
		if o.mpicc == "" {
			o.mpicc = "mpicc"
			if o.launcher == "" {
				o.mpicc = mpiccFor(o.mpirun)
			}
		}
		b, err := planBench(*o, name)
		if err != nil {
			return "", err
		}
		if o.dryRun {
			fmt.Fprintln(c.OutOrStdout(), "# "+shellQuote(b.argv))
		} else if err := b.ensure(c.ErrOrStderr()); err != nil {
			return "", err
		}
		*bin = b.out
	}
	return lib, nil
}

// measureOverlap runs bench/overlap once per --overlap-backends backend,
// forced alone in overlap mode (COLLMUX_OVERLAP=1, so the fused kernels
// run lean), each collective and size beside the reference GEMM stream,
// and reads what it printed (the path column is via-B).
func measureOverlap(c *cobra.Command, o tuneOpts) ([]tune.OverlapSample, error) {
	top, err := dispatch.ParseRules("*:*:0-"+o.overlapMax+":mpi", "--overlap-max-bytes")
	if err != nil {
		return nil, err
	}
	if top[0].Hi == math.MaxUint64 {
		return nil, fmt.Errorf("--overlap-max-bytes: give a size (the benchmark allocates it)")
	}
	var runs []benchRun
	for _, b := range o.overlapBackends {
		if _, ok := dispatch.ParseBackend(b); !ok {
			return nil, fmt.Errorf("--overlap-backends: unknown backend %q", b)
		}
		runs = append(runs, benchRun{"beside a GEMM stream: " + b, []string{"COLLMUX_OVERLAP=1", "COLLMUX_RULES=*:cuda:*:" + b},
			[]string{"via-" + b, fmt.Sprint(top[0].Hi), strings.Join(o.overlapColls, ",")}})
	}
	csv, err := runBench(c, o, "overlap", &o.overlapBench, runs, o.saveOverlapCSV)
	if err != nil {
		return nil, err
	}
	return overlapCSV(csv)
}

// measureOps runs bench/fusedops once per form of the fused GEMV +
// all-reduce (COLLMUX_OPS_ALGO=<form>, its contender named d:<form>) and
// reads the times.
func measureOps(c *cobra.Command, o tuneOpts) ([]tune.OpsSample, error) {
	var runs []benchRun
	for _, f := range tune.OpsForms {
		runs = append(runs, benchRun{"the fused operations' form " + f, []string{"COLLMUX_OPS_ALGO=" + f}, []string{o.opsMaxM, "d", "d:" + f}})
	}
	csv, err := runBench(c, o, "fusedops", &o.opsBench, runs, o.saveOpsCSV)
	if err != nil {
		return nil, err
	}
	return opsCSV(csv)
}

// benchRun is one run of a benchmark: what it measures (for the log), the
// variables its ranks get besides the preload, and its arguments.
type benchRun struct {
	what      string
	env, args []string
}

// runBench runs bench/<name>.c (*bin, else built at first use) once per
// run under the launcher, the library preloaded, and returns what they
// printed, also written to save where given; under --dry-run it prints
// the command lines and returns errDryRun.
func runBench(c *cobra.Command, o tuneOpts, name string, bin *string, runs []benchRun, save string) (*bytes.Buffer, error) {
	lib, err := benchSetup(c, &o, name, bin)
	if err != nil {
		return nil, err
	}
	l, err := launcherOf(c, o)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	for _, r := range runs {
		argv, err := l.render(o.np, append([]string{"LD_PRELOAD=" + lib, "NCCL_NVLS_ENABLE=0"}, r.env...), append([]string{*bin}, r.args...))
		if err != nil {
			return nil, err
		}
		if o.dryRun {
			fmt.Fprintln(c.OutOrStdout(), shellQuote(argv))
			continue
		}
		fmt.Fprintln(c.ErrOrStderr(), r.what)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "NCCL_NVLS_ENABLE=0", "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
		var errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("%s: %v\n%s", shellQuote(argv), err, errb.String())
		}
	}
	if o.dryRun {
		return nil, errDryRun
	}
	if save != "" {
		if err := os.WriteFile(save, out.Bytes(), 0o644); err != nil {
			return nil, err
		}
	}
	return &out, nil
}

// errDryRun is measure's answer under --dry-run, once it has printed the
// command line.
var errDryRun = errors.New("dry run")

// unlessDry is err, or nil where it is errDryRun (the command lines were
// what --dry-run asked for).
func unlessDry(err error) error {
	if err == errDryRun {
		return nil
	}
	return err
}

// launcherOf is the launcher that starts the benchmark: --launcher's
// template, or --mpirun with the flags of its MPI.
func launcherOf(c *cobra.Command, o tuneOpts) (launcher, error) {
	if o.launcher != "" {
		if c.Flags().Changed("mpirun") {
			return launcher{}, fmt.Errorf("give --launcher or --mpirun, not both")
		}
		return parseLauncher(o.launcher)
	}
	l, note, err := detectLauncher(o.mpirun)
	if note != "" {
		fmt.Fprintln(c.ErrOrStderr(), "note:", note)
	}
	return l, err
}

// installSystem installs t for every user: tuning-<key>.json, mode 0644, in
// the system folder (made 0755 if missing), written whole then renamed
// into place so that a starting program never reads half of it. It fails
// where the library would not trust the result (TrustedSystemPath).
func installSystem(c *cobra.Command, t tune.Table) (string, error) {
	dir, err := dispatch.SystemTuningDir(os.Getenv)
	if err != nil {
		return "", err
	}
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		if err := os.Chmod(dir, 0o755); err != nil { // whatever the umask
			return "", err
		}
	}
	if err := dispatch.TrustedSystemPath(dir); err != nil {
		return "", fmt.Errorf("collmux would not read a table there: %v", err)
	}
	f, err := os.CreateTemp(dir, ".tuning-*.json")
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	f.Close()
	defer os.Remove(tmp) // gone once renamed
	if err := t.Write(tmp); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		return "", err
	}
	dst := filepath.Join(dir, "tuning-"+t.GPUKey+".json")
	if err := os.Rename(tmp, dst); err != nil {
		return "", err
	}
	if err := dispatch.TrustedSystemPath(dst); err != nil {
		return "", fmt.Errorf("collmux would not read the table: %v", err)
	}
	if os.Getuid() != 0 {
		fmt.Fprintf(c.ErrOrStderr(), "note: %s belongs to uid %d, not root: only that user's programs trust it\n", dst, os.Getuid())
	}
	return dst, nil
}

// readCSVs reads recorded runs of a benchmark, each file with read (say,
// tune.ReadCSV with what each path column measured).
func readCSVs[S any](paths []string, read func(io.Reader) ([]S, error)) ([]S, error) {
	var all []S
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		s, err := read(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %v", p, err)
		}
		all = append(all, s...)
	}
	return all, nil
}

// gpuBenchCSV reads gpu_bench's CSV, pathOf naming what each path column
// measured ("" skips it).
func gpuBenchCSV(pathOf func(string) string) func(io.Reader) ([]tune.Sample, error) {
	return func(r io.Reader) ([]tune.Sample, error) { return tune.ReadCSV(r, pathOf) }
}

// overlapCSV reads bench/overlap's CSV: the path column is via-B, backend
// B forced alone; other paths are skipped.
func overlapCSV(r io.Reader) ([]tune.OverlapSample, error) {
	return tune.ReadOverlapCSV(r, func(p string) string {
		if b, ok := strings.CutPrefix(p, "via-"); ok {
			return b
		}
		return ""
	})
}

// opsCSV reads bench/fusedops's CSV: contenders d:<form>.
func opsCSV(r io.Reader) ([]tune.OpsSample, error) { return tune.ReadOpsCSV(r, tune.FormOf) }

// servesOn reports, on ranks ranks, whether backend b runs collective c of
// n bytes rather than falling back: the fused kernels as fused.Serves
// says, the copy engines the collectives the built-in rules send them
// (those that only move data), the others everything.
func servesOn(ranks int) func(b, c string, n uint64) bool {
	copies := map[string]bool{}
	for _, r := range dispatch.DefaultRules() {
		if r.Backend == dispatch.Copy && r.Coll >= 0 {
			copies[r.Coll.String()] = true
		}
	}
	return func(b, c string, n uint64) bool {
		if b == "copy" {
			return copies[c]
		}
		return fused.Serves(b, c, n, ranks)
	}
}

// samplesOf reads the recorded runs where files are given, else measures.
func samplesOf[S any](files []string, read func(io.Reader) ([]S, error), measure func() ([]S, error)) ([]S, error) {
	if len(files) > 0 {
		return readCSVs(files, read)
	}
	return measure()
}

// overlapReport prints, per collective and size measured beside the GEMMs,
// each backend's GEMM slowdown, its time beside them against alone, and
// its energy per GB alone (issue 19's figures).
func overlapReport(w io.Writer, s []tune.OverlapSample) {
	fmt.Fprintln(w, "beside a GEMM stream (collective, bytes, backend: GEMM slowdown, time beside / alone, J/GB alone):")
	for _, x := range s {
		fmt.Fprintf(w, "  %s %s %s: %+.1f%%, %.1f / %.1f us, %.1f J/GB\n", x.Coll, units.Bytes(x.Bytes), x.Backend, 100*x.GEMMSlowdown,
			x.BesideUs, x.AloneUs, x.JPerGB)
	}
}

// policyOf reads gpu_bench's path column: "via-B" is backend B forced
// alone, "tuned" the tuned policy; "nccl" (NCCL called directly, not
// through collmux) and anything else are skipped.
func policyOf(p string) string {
	if b, ok := strings.CutPrefix(p, "via-"); ok {
		return b
	}
	if p == tune.Tuned {
		return p
	}
	return ""
}

// benchPolicy is one policy of a gpu_bench run: collmux_set_rules(rules)
// before its turn ("" restores the defaults and tuning table), measured up
// to max bytes.
type benchPolicy struct {
	name, rules string
	max         uint64
}

// arg is the policy as gpu_bench takes it: NAME=RULES@MAX.
func (p benchPolicy) arg() string { return fmt.Sprintf("%s=%s@%d", p.name, p.rules, p.max) }

// sweepPolicies turns the backends into gpu_bench policies
// (via-B=*:cuda:*:B@max), each up to its size limit, and the largest size.
func sweepPolicies(o tuneOpts) (uint64, []benchPolicy, error) {
	size := func(flag, v string) (uint64, error) {
		r, err := dispatch.ParseRules("*:*:0-"+v+":mpi", flag)
		if err != nil {
			return 0, err
		}
		return r[0].Hi, nil
	}
	top, err := size("--max-bytes", o.maxBytes)
	if err != nil {
		return 0, nil, err
	}
	var policies []benchPolicy
	for _, b := range o.backends {
		if _, ok := dispatch.ParseBackend(b); !ok {
			return 0, nil, fmt.Errorf("--backends: unknown backend %q", b)
		}
		lim := top
		switch {
		case b == "staged":
			lim, err = size("--staged-max-bytes", o.stgMax)
		case b == "fused" && o.fusedMax != "":
			lim, err = size("--fused-max-bytes", o.fusedMax)
		case b == "fused":
			lim = uint64(fused.SlotBytes) * uint64(max(o.np, 1))
		}
		if err != nil {
			return 0, nil, err
		}
		policies = append(policies, benchPolicy{"via-" + b, "*:cuda:*:" + b, min(lim, top)})
	}
	return top, policies, nil
}

// expectedLines is how many CSV lines gpu_bench prints: a header, then for
// 5 collectives and sizes 8, 16, ... up to max, NCCL's line and one per
// policy that reaches that size.
func expectedLines(max uint64, policies []benchPolicy) int {
	n := 1
	for b := uint64(8); b <= max; b *= 2 {
		n += 5
		for _, p := range policies {
			if b <= p.max {
				n += 5
			}
		}
	}
	return n
}

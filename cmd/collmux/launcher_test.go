// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"collmux/dispatch"
	"collmux/topo/nvlink"
	"collmux/tune"
)

// The launcher templates render the variables the ranks need in each
// launcher's syntax: Open MPI's -x VAR=VALUE, MPICH's -genv VAR VALUE and
// Slurm's --export=ALL,VAR=VALUE,...
func TestLauncherTemplate(t *testing.T) {
	env := []string{"LD_PRELOAD=/opt/c/lib.so", "NCCL_NVLS_ENABLE=0"}
	prog := []string{"./gpu_bench", "64", "via-nccl=*:cuda:*:nccl@64"}
	cases := []struct {
		tmpl, want, wantErr string
	}{
		{tmpl: "mpirun -np {np} {env:-x %s} {prog}", want: "mpirun -np 4 -x LD_PRELOAD=/opt/c/lib.so -x NCCL_NVLS_ENABLE=0 ./gpu_bench 64 via-nccl=*:cuda:*:nccl@64"},
		{tmpl: "mpirun.mpich -n {np} {env:-genv %s %s}", want: "mpirun.mpich -n 4 -genv LD_PRELOAD /opt/c/lib.so -genv NCCL_NVLS_ENABLE 0 ./gpu_bench 64 via-nccl=*:cuda:*:nccl@64"},
		{tmpl: "srun -n {np} --export=ALL,{env}", want: "srun -n 4 --export=ALL,LD_PRELOAD=/opt/c/lib.so,NCCL_NVLS_ENABLE=0 ./gpu_bench 64 via-nccl=*:cuda:*:nccl@64"},
		{tmpl: "srun --ntasks={np} --export=ALL,{env:%s=%s} --mpi=pmix {prog}", want: "srun --ntasks=4 --export=ALL,LD_PRELOAD=/opt/c/lib.so,NCCL_NVLS_ENABLE=0 --mpi=pmix ./gpu_bench 64 via-nccl=*:cuda:*:nccl@64"},
		{tmpl: "  env  {env}   {prog} --np={np} ", want: "env LD_PRELOAD=/opt/c/lib.so NCCL_NVLS_ENABLE=0 ./gpu_bench 64 via-nccl=*:cuda:*:nccl@64 --np=4"},
		{tmpl: "x --opt={{a}} {env}", want: "x --opt={a} LD_PRELOAD=/opt/c/lib.so NCCL_NVLS_ENABLE=0 ./gpu_bench 64 via-nccl=*:cuda:*:nccl@64"},
		{tmpl: "mpirun -np {np} {prog}", wantErr: "no {env}"},
		{tmpl: "mpirun -n {n} {env}", wantErr: "unknown placeholder {n}"},
		{tmpl: "mpirun -n {np {env}", wantErr: "without its }"},
		{tmpl: "mpirun -n np} {env}", wantErr: "without its {"},
		{tmpl: "mpirun {env:-x} {prog}", wantErr: "has 0 %s"},
		{tmpl: "mpirun --x={env:-genv %s %s}", wantErr: "a word of its own"},
		{tmpl: "mpirun {env} a{prog}", wantErr: "a word of its own"},
		{tmpl: "mpirun {env} {prog} {prog}", wantErr: "more than once"},
	}
	for _, tc := range cases {
		l, err := parseLauncher(tc.tmpl)
		var got []string
		if err == nil {
			got, err = l.render(4, env, prog)
		}
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%q: error %v, want one saying %q", tc.tmpl, err, tc.wantErr)
		case tc.wantErr == "" && err != nil:
			t.Errorf("%q: %v", tc.tmpl, err)
		case tc.wantErr == "" && strings.Join(got, " ") != tc.want:
			t.Errorf("%q:\n got %q\nwant %q", tc.tmpl, strings.Join(got, " "), tc.want)
		}
	}
	// a value stays one word, and a comma cannot hide in Slurm's list
	l, _ := parseLauncher("mpiexec {env:-genv %s %s}")
	if got, _ := l.render(2, []string{"A=x y"}, []string{"p"}); strings.Join(got, "|") != "mpiexec|-genv|A|x y|p" {
		t.Errorf("value with a space: %q", got)
	}
	l, _ = parseLauncher("srun --export=ALL,{env}")
	if _, err := l.render(2, []string{"A=x,y"}, []string{"p"}); err == nil {
		t.Error("a comma in a value went into --export's list")
	}
}

// fakeMPI is a directory holding mpirun look-alikes that print what the
// real ones print for --version.
func fakeMPI(t *testing.T) string {
	dir := t.TempDir()
	for name, version := range map[string]string{
		"ompi-run":  "mpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/",
		"mpich-run": "HYDRA build details:\n    Version:                                 4.0.2",
		"odd-run":   "some launcher 1.0",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\necho '"+version+"'\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// --dry-run prints the command line tune and check would run: --mpirun's
// flags follow its --version (Open MPI's where it says nothing known), and
// --launcher's template replaces them.
func TestDryRun(t *testing.T) {
	mpi := fakeMPI(t)
	lib, _ := filepath.Abs("lib.so")
	table := filepath.Join(testdata, "h200x2-resident", "tuning.json")
	abs, _ := filepath.Abs(table)
	common := []string{"--np", "2", "--bench", "./gpu_bench", "--lib", "lib.so", "--max-bytes", "64", "--backends", "nccl", "--dry-run"}
	policies := " ./gpu_bench 64 'via-nccl=*:cuda:*:nccl@64'\n"
	cases := []struct {
		args      []string
		want      string
		wantNote  bool
		wantError string
	}{
		{args: []string{"tune", "--mpirun", filepath.Join(mpi, "ompi-run")},
			want: filepath.Join(mpi, "ompi-run") + " -np 2 -x LD_PRELOAD=" + lib + " -x NCCL_NVLS_ENABLE=0" + policies},
		{args: []string{"tune", "--mpirun", filepath.Join(mpi, "mpich-run")},
			want: filepath.Join(mpi, "mpich-run") + " -n 2 -genv LD_PRELOAD " + lib + " -genv NCCL_NVLS_ENABLE 0" + policies},
		{args: []string{"tune", "--mpirun", filepath.Join(mpi, "odd-run")},
			want: filepath.Join(mpi, "odd-run") + " -np 2 -x LD_PRELOAD=" + lib + " -x NCCL_NVLS_ENABLE=0" + policies, wantNote: true},
		{args: []string{"tune", "--launcher", "srun -n {np} --export=ALL,{env}"},
			want: "srun -n 2 --export=ALL,LD_PRELOAD=" + lib + ",NCCL_NVLS_ENABLE=0" + policies},
		{args: []string{"check", "--table", table, "--mpirun", filepath.Join(mpi, "mpich-run")},
			want: filepath.Join(mpi, "mpich-run") + " -n 2 -genv LD_PRELOAD " + lib + " -genv NCCL_NVLS_ENABLE 0 -genv COLLMUX_TUNING " + abs +
				" ./gpu_bench 64 tuned=@64 'via-nccl=*:cuda:*:nccl@64'\n"},
		{args: []string{"check", "--table", table, "--launcher", "srun -n {np} --export=ALL,{env}"},
			want: "srun -n 2 --export=ALL,LD_PRELOAD=" + lib + ",NCCL_NVLS_ENABLE=0,COLLMUX_TUNING=" + abs +
				" ./gpu_bench 64 tuned=@64 'via-nccl=*:cuda:*:nccl@64'\n"},
		{args: []string{"tune", "--launcher", "srun {env}", "--mpirun", "mpiexec"}, wantError: "not both"},
		{args: []string{"tune", "--mpirun", filepath.Join(mpi, "missing")}, wantError: "missing"},
	}
	for _, tc := range cases {
		out, err := run(append(tc.args, common...)...)
		if tc.wantError != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantError) {
				t.Errorf("%v: error %v, want %q", tc.args, err, tc.wantError)
			}
			continue
		}
		note, line, _ := strings.Cut(out, "note: ")
		if tc.wantNote {
			_, line, _ = strings.Cut(line, "\n")
			out = note + line
		}
		if err != nil || out != tc.want || tc.wantNote != (line != "") {
			t.Errorf("%v: %v\n got %q\nwant %q", tc.args, err, out, tc.want)
		}
	}
}

// check runs its benchmark under a real launcher of each MPI: the
// benchmark is a script that checks that the variables reached every rank
// and, on rank 0, prints a run recorded on 2 x H200.
func TestCheckUnderLaunchers(t *testing.T) {
	data, _ := filepath.Abs(filepath.Join(testdata, "h200x2-resident"))
	bench := filepath.Join(t.TempDir(), "bench.sh")
	script := `#!/bin/sh
[ "$NCCL_NVLS_ENABLE" = 0 ] && [ "$COLLMUX_TUNING" = "` + filepath.Join(data, "tuning.json") + `" ] || { echo "rank without the variables" >&2; exit 3; }
case "$LD_PRELOAD" in */nonexistent-collmux.so) ;; *) echo "LD_PRELOAD=$LD_PRELOAD" >&2; exit 3;; esac
[ "${PMI_RANK:-$OMPI_COMM_WORLD_RANK}" = 0 ] && cat "` + filepath.Join(data, "policies.csv") + `"
exit 0
`
	if err := os.WriteFile(bench, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, mpirun := range []string{"mpirun.mpich", "mpirun.openmpi"} {
		t.Run(mpirun, func(t *testing.T) {
			if _, err := exec.LookPath(mpirun); err != nil {
				t.Skip(mpirun, " is not installed")
			}
			// the library is not loaded (ld.so only warns): the script checks LD_PRELOAD's value
			out := execute(t, "check", "--table", filepath.Join(data, "tuning.json"), "--np", "2", "--mpirun", mpirun,
				"--bench", bench, "--lib", "/nonexistent-collmux.so", "--max-bytes", "16M", "--backends", "nccl,fused,staged")
			if !strings.Contains(out, "| allgather | 28 | 1.079 (16777216 B) |") {
				t.Errorf("check under %s:\n%s", mpirun, out)
			}
		})
	}
}

// tune --install --system writes the table, 0644 in a 0755 folder, where
// COLLMUX_TUNING_DIR says, and routes and info then say it is in force
// and that it came from there; a folder collmux would not trust is refused.
func TestInstallSystem(t *testing.T) {
	key := nvlink.Read(nil).Key() // this machine's, as the tool sees it in tests
	root := t.TempDir()
	sys := filepath.Join(root, "site", "collmux")
	t.Setenv("COLLMUX_TUNING_DIR", sys)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(root, "home"))
	t.Setenv("COLLMUX_TUNING", "")
	t.Setenv("COLLMUX_RULES", "")
	tuneArgs := []string{"tune", "--from-csv", filepath.Join(testdata, "bench_collmux.csv") + "," + filepath.Join(testdata, "bench_fused.csv"),
		"--gpu-key", key, "--out", filepath.Join(root, "t.json"), "--plots", root, "--install", "--system"}
	out := execute(t, tuneArgs...)
	dst := filepath.Join(sys, "tuning-"+key+".json")
	if !strings.Contains(out, "installed "+dst+" for every user") {
		t.Errorf("tune:\n%s", out)
	}
	for path, want := range map[string]os.FileMode{sys: 0o755 | os.ModeDir, dst: 0o644} {
		if st, err := os.Lstat(path); err != nil || st.Mode() != want {
			t.Errorf("%s: %v %v, want %v", path, st.Mode(), err, want)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(sys, ".tuning-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	tab, _ := tune.Read(dst)
	inForce := regexp.QuoteMeta("Tuning table: " + dst + " (from the system folder (COLLMUX_TUNING_DIR))")
	for _, args := range [][]string{{"routes", "--nvlink", "full"}, {"info"}} {
		if out := execute(t, args...); !regexp.MustCompile(inForce).MatchString(out) ||
			!strings.Contains(out, "tuning table "+dst) || len(tab.Rules) == 0 {
			t.Errorf("%s does not show the system table in force:\n%s", args[0], out)
		}
	}
	// the user's own table comes first
	user := filepath.Join(root, "home", "collmux")
	os.MkdirAll(user, 0o755)
	if err := tab.Write(filepath.Join(user, "tuning-"+key+".json")); err != nil {
		t.Fatal(err)
	}
	if out := execute(t, "routes", "--nvlink", "full"); !strings.Contains(out, "(from the user's folder)") {
		t.Errorf("routes with a user table:\n%s", out)
	}
	os.RemoveAll(user)
	// a folder others may write: install refused, and the library skips the table
	os.Chmod(sys, 0o777)
	if _, err := run(tuneArgs...); err == nil || !strings.Contains(err.Error(), "writable by its group or others") {
		t.Errorf("install into a 0777 folder: %v", err)
	}
	out, err := run("info")
	if err != nil || !strings.Contains(out, "Tuning table: none: COLLMUX_TUNING is unset and no table for this machine's GPU key is installed in "+user+" or "+sys+" that collmux may use (see Warnings)") ||
		!strings.Contains(out, "system tuning table "+dst+" not used: folder "+sys+" is writable by its group or others (mode 0777)") {
		t.Errorf("info with an untrusted system table: %v\n%s", err, out)
	}
	if _, err := run("tune", "--from-csv", filepath.Join(testdata, "bench_collmux.csv"), "--system", "--plots", root, "--out", filepath.Join(root, "u.json")); err == nil {
		t.Error("--system without --install accepted")
	}
	_ = dispatch.DefaultSystemTuningDir
}

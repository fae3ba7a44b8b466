package tests

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// faultReport is what a job that faulted in the program's own code shows of
// who saw the fault.
type faultReport struct {
	exit        string // the launcher's exit status
	ownHandler  bool   // the program's own handler ran (its line)
	ompiReport  bool   // Open MPI's handler ran ("Process received signal")
	traceToProg bool   // a backtrace printed by the MPI reaches the program's code
}

func (r faultReport) String() string {
	return fmt.Sprintf("%s, own handler %v, Open MPI report %v, backtrace into the program %v",
		r.exit, r.ownHandler, r.ompiReport, r.traceToProg)
}

func exitStatus(err error) string {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return "exit status 0"
	case errors.As(err, &ee):
		return ee.String()
	default:
		return err.Error()
	}
}

// A fault in the program after MPI_Init reaches the program's own handler,
// or else the MPI's, as without collmux, whichever was installed when, and
// whether collmux is active or disabled: the Go runtime's handlers, which
// it installs as the library loads, must not take the fault or hide the
// handlers from the MPI (Open MPI installs its own only where none is).
func TestFaultsReachNativeHandlers(t *testing.T) {
	const hydraHangup = "EXIT STRING: Hangup (signal 1)"
	cases := []struct{ when, kind string }{
		{"none", "segv"},
		{"before", "segv"},
		{"after", "segv"},
		{"none", "fpe"},
	}
	for _, m := range impls(t) {
		prog := program(t, m, "sigtest.c", "sigtest")
		lib := libPath(t)
		for _, c := range cases {
			t.Run(m.name+"/"+c.when+"/"+c.kind, func(t *testing.T) {
				t.Parallel()
				variants := []struct {
					name string
					env  map[string]string
				}{
					{"native", nil},
					{"collmux", map[string]string{"LD_PRELOAD": lib}},
					{"COLLMUX_DISABLE=1", map[string]string{"LD_PRELOAD": lib, "COLLMUX_DISABLE": "1"}},
				}
				reports := make([]faultReport, len(variants))
				outputs := make([]string, len(variants))
				var wg sync.WaitGroup
				for i, v := range variants {
					wg.Add(1)
					go func() { // Open MPI takes two seconds over a failed job: run them side by side
						defer wg.Done()
						stdout, stderr, err := run(t, m, 1, v.env, prog, c.when, c.kind)
						// Hydra (MPICH's launcher), loaded, now and then
						// reports a rank that left with _exit(42) from its
						// handler as ended by SIGHUP, natively as often as
						// under collmux (about 1 run in 150 of three side by
						// side): such a run is made again, twice at most
						for again := 0; again < 2 && strings.Contains(stdout+stderr, hydraHangup); again++ {
							stdout, stderr, err = run(t, m, 1, v.env, prog, c.when, c.kind)
						}
						out := stdout + stderr
						outputs[i] = out
						reports[i] = faultReport{
							exit:        exitStatus(err),
							ownHandler:  strings.Contains(out, "sigtest: own handler"),
							ompiReport:  strings.Contains(out, "Process received signal"),
							traceToProg: strings.Contains(out, prog+"("),
						}
					}()
				}
				wg.Wait()
				native := reports[0]
				if strings.Contains(outputs[0], "sigtest: survived") || !strings.Contains(outputs[0], "sigtest: rank 0 faulting") {
					t.Fatalf("native sigtest did not fault as meant:\n%s", tail(outputs[0]))
				}
				if native.ownHandler != (c.when != "none") {
					t.Fatalf("native: %v, with the program's handler installed %s MPI_Init\n%s", native, c.when, tail(outputs[0]))
				}
				for i, v := range variants[1:] {
					if got := reports[i+1]; got != native {
						t.Errorf("%s: %v\nnative: %v\n--- %s output:\n%s\n--- native output:\n%s",
							v.name, got, native, v.name, tail(outputs[i+1]), tail(outputs[0]))
					}
				}
			})
		}
	}
}

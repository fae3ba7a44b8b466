package main

import (
	"bytes"
	"encoding/csv"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rampMeter stands in for NVML where there is no GPU: GPU i draws
// 100 + 10 i W, rising by 1 W a reading, and its counter adds what that
// draws over a reading; GPU 1's third reading fails.
type rampMeter struct {
	gpus  int
	reads []int
	mj    []uint64
}

func (m *rampMeter) Count() int { return m.gpus }
func (m *rampMeter) Read(i int) (uint32, uint64, error) {
	m.reads[i]++
	if i == 1 && m.reads[i] == 3 {
		return 0, 0, errors.New("reading failed")
	}
	mw := uint32(100_000 + 10_000*i + 1_000*m.reads[i])
	m.mj[i] += uint64(mw) / 50
	return mw, 5_000_000 + m.mj[i], nil
}
func (m *rampMeter) Close() {}

// power records every GPU while the command runs, writes the CSV and the
// plot, and ends with the command's own status.
func TestPower(t *testing.T) {
	for _, tc := range []struct {
		name    string
		command string
		exit    int
	}{
		{"runs", "sleep 0.3", 0},
		{"fails", "sleep 0.1; exit 3", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &rampMeter{gpus: 2, reads: make([]int, 2), mj: make([]uint64, 2)}
			prefix := filepath.Join(t.TempDir(), "p")
			var out, errw bytes.Buffer
			err := runPower(m, 10*time.Millisecond, prefix, []string{"sh", "-c", tc.command}, &out, &errw)
			var ee *exec.ExitError
			if tc.exit == 0 && err != nil || tc.exit != 0 && (!errors.As(err, &ee) || ee.ExitCode() != tc.exit) {
				t.Fatalf("err %v, want exit status %d", err, tc.exit)
			}
			f, err := os.Open(prefix + ".csv")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			rows, err := csv.NewReader(f).ReadAll()
			if err != nil || len(rows) < 2 || strings.Join(rows[0], ",") != "seconds,gpu,watts,joules" {
				t.Fatalf("csv: %v %q", err, rows)
			}
			last := map[string][2]float64{}
			per := map[string]int{}
			for _, r := range rows[1:] {
				ts, _ := strconv.ParseFloat(r[0], 64)
				j, _ := strconv.ParseFloat(r[3], 64)
				if p, ok := last[r[1]]; ok && (ts < p[0] || j < p[1]) {
					t.Errorf("GPU %s: time or energy went back: %v", r[1], r)
				}
				last[r[1]] = [2]float64{ts, j}
				per[r[1]]++
			}
			if per["0"] < 5 || per["1"] != per["0"]-1 {
				t.Errorf("readings per GPU %v: want 5 or more, GPU 1 one fewer (its failed reading)", per)
			}
			if st, err := os.Stat(prefix + ".png"); err != nil || st.Size() < 1000 {
				t.Errorf("plot: %v", err)
			}
			if !strings.Contains(out.String(), "GPU 1: mean") || !strings.Contains(errw.String(), "reading failed") {
				t.Errorf("summary %q, stderr %q", out.String(), errw.String())
			}
		})
	}
	if err := runPower(&rampMeter{gpus: 1, reads: make([]int, 1), mj: make([]uint64, 1)}, time.Microsecond, "x", []string{"true"}, nil, nil); err == nil {
		t.Error("an interval under 1ms was taken")
	}
}

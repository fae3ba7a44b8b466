// SPDX-License-Identifier: Apache-2.0

// Package trace writes and merges collmux's timelines (COLLMUX_TRACE): one
// file per rank in Chrome's Trace Event Format ({"traceEvents": [...]},
// read by Perfetto and chrome://tracing), each routed MPI call one complete
// ("X") event, and `collmux trace merge` joins the ranks' files into one.
//
// Clocks: every rank's timestamps count microseconds from one instant all
// ranks share, taken at MPI_Init right after a synchronising collective
// (ranks on rank 0's node use rank 0's CLOCK_MONOTONIC reading exactly,
// since that clock is the node's; ranks elsewhere their own reading, off by
// the skew with which they left the collective). The files are therefore
// aligned already, and merging needs only to join and sort them.
package trace

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"

	"collmux/internal/privfile"
)

// Event is one trace event. Args stays raw so that a merge keeps what
// each file said, whatever it was.
type Event struct {
	Name string          `json:"name"`
	Cat  string          `json:"cat,omitempty"`
	Ph   string          `json:"ph"`
	TS   float64         `json:"ts"`
	Dur  float64         `json:"dur,omitempty"`
	PID  int             `json:"pid"`
	TID  int             `json:"tid"`
	Args json.RawMessage `json:"args,omitempty"`
}

// Meta is what a file says of itself, in "otherData".
type Meta struct {
	Tool     string `json:"tool"`
	Version  string `json:"version,omitempty"`
	Rank     int    `json:"rank"`
	Ranks    int    `json:"ranks"`
	Host     string `json:"host,omitempty"`
	Clock    string `json:"clock"`
	EpochUTC int64  `json:"epoch_realtime_ns"` // CLOCK_REALTIME at the shared instant ts 0
	Dropped  uint64 `json:"dropped_events"`    // calls not recorded: the buffer was full
	Merged   []int  `json:"merged_ranks,omitempty"`
}

// File is a trace file.
type File struct {
	TraceEvents     []Event `json:"traceEvents"`
	DisplayTimeUnit string  `json:"displayTimeUnit,omitempty"`
	OtherData       Meta    `json:"otherData"`
}

// Call is one routed call as the library recorded it.
type Call struct {
	Name, Family   string
	StartNS, DurNS uint64 // from the shared instant
	TID            int
	Backend, Mem   string
	Form           string
	Bytes          uint64
	RC             int
}

// Clock describes the timestamps of the library's files.
const Clock = "CLOCK_MONOTONIC microseconds from a collective at MPI_Init, shared by all ranks"

func us(ns uint64) string { return strconv.FormatFloat(float64(ns)/1e3, 'f', 3, 64) }

// WriteCalls writes one rank's file: a process and thread names, then one
// "X" event per call. It writes by hand rather than through encoding/json:
// a trace can hold a million events, written while MPI_Finalize waits.
func WriteCalls(w io.Writer, m Meta, calls []Call) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	meta, err := json.Marshal(m)
	if err != nil {
		return err
	}
	fmt.Fprintf(bw, "{\"displayTimeUnit\":\"ns\",\"otherData\":%s,\"traceEvents\":[\n", meta)
	fmt.Fprintf(bw, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"rank %d\"}},\n", m.Rank, m.Rank)
	fmt.Fprintf(bw, "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}}", m.Rank, m.Rank)
	for _, c := range calls {
		fmt.Fprintf(bw, ",\n{\"name\":%q,\"cat\":%q,\"ph\":\"X\",\"ts\":%s,\"dur\":%s,\"pid\":%d,\"tid\":%d,"+
			"\"args\":{\"backend\":%q,\"bytes\":%d,\"mem\":%q,\"form\":%q",
			c.Name, c.Family, us(c.StartNS), us(c.DurNS), m.Rank, c.TID, c.Backend, c.Bytes, c.Mem, c.Form)
		if c.RC != 0 {
			fmt.Fprintf(bw, ",\"rc\":%d", c.RC)
		}
		bw.WriteString("}}")
	}
	bw.WriteString("\n]}\n")
	return bw.Flush()
}

// Create opens path for a trace (package privfile: 0600, no symbolic link).
func Create(path string) (*os.File, error) { return privfile.Create(path) }

// WriteFile writes a rank's trace to path (see Create).
func WriteFile(path string, m Meta, calls []Call) error {
	return privfile.Write(path, func(w io.Writer) error { return WriteCalls(w, m, calls) })
}

// Read reads a trace file.
func Read(path string) (File, error) {
	var f File
	b, err := os.ReadFile(path)
	if err != nil {
		return f, err
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("%s: %v", path, err)
	}
	return f, nil
}

// Merge joins per-rank files into one trace: each rank stays its own
// process (pid = rank), metadata events first, then every event by time
// (ties by rank and thread, so the result does not depend on the order of
// the files). A rank given twice is an error: its events would interleave.
func Merge(files []File) (File, error) {
	out := File{DisplayTimeUnit: "ns", OtherData: Meta{Tool: "collmux trace merge", Rank: -1, Clock: Clock}}
	seen := map[int]bool{}
	for i, f := range files {
		m := f.OtherData
		if m.Tool == "" && len(f.TraceEvents) == 0 {
			return out, fmt.Errorf("file %d: not a collmux trace", i+1)
		}
		ranks := m.Merged
		if ranks == nil {
			ranks = []int{m.Rank}
		}
		for _, r := range ranks {
			if seen[r] {
				return out, fmt.Errorf("rank %d is in more than one file", r)
			}
			seen[r] = true
			out.OtherData.Merged = append(out.OtherData.Merged, r)
		}
		if m.Clock != "" && m.Clock != Clock {
			return out, fmt.Errorf("file %d: timestamps on another clock (%q)", i+1, m.Clock)
		}
		out.OtherData.Ranks = max(out.OtherData.Ranks, m.Ranks)
		out.OtherData.Dropped += m.Dropped
		if out.OtherData.Version == "" {
			out.OtherData.Version = m.Version
		}
		if i == 0 || (m.EpochUTC != 0 && m.EpochUTC < out.OtherData.EpochUTC) {
			out.OtherData.EpochUTC = m.EpochUTC
		}
		out.TraceEvents = append(out.TraceEvents, f.TraceEvents...)
	}
	sort.Ints(out.OtherData.Merged)
	ev := out.TraceEvents
	sort.SliceStable(ev, func(i, j int) bool {
		a, b := ev[i], ev[j]
		if (a.Ph == "M") != (b.Ph == "M") {
			return a.Ph == "M"
		}
		if a.TS != b.TS {
			return a.TS < b.TS
		}
		if a.PID != b.PID {
			return a.PID < b.PID
		}
		return a.TID < b.TID
	})
	return out, nil
}

// MergeFiles merges the files at paths into out (written as Create does).
func MergeFiles(out string, paths []string) (File, error) {
	var files []File
	for _, p := range paths {
		f, err := Read(p)
		if err != nil {
			return File{}, err
		}
		files = append(files, f)
	}
	m, err := Merge(files)
	if err != nil {
		return m, err
	}
	f, err := Create(out)
	if err != nil {
		return m, err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	enc := json.NewEncoder(bw)
	err = enc.Encode(m)
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return m, err
}

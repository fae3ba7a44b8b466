// Package topo describes the machine collmux runs on for people and for
// tuning: its GPUs and NVLinks (package nvlink), its CPU (cpuid), the NCCL
// and MPI it will use, and a fingerprint of all that. Tuning tables record
// the fingerprint and are matched by the GPU key.
package topo

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"text/tabwriter"

	"github.com/klauspost/cpuid/v2"

	"collmux/topo/nvlink"
)

// Machine is what collmux knows of the node.
type Machine struct {
	Hostname string `json:"hostname"`
	CPU      string `json:"cpu"`
	Cores    int    `json:"cores"`
	nvlink.Node
	NCCL        string `json:"nccl,omitempty"`
	MPI         string `json:"mpi,omitempty"`
	GPUKey      string `json:"gpu_key"`     // GPUs, links and driver: what a tuning table must match
	Fingerprint string `json:"fingerprint"` // GPUKey plus CPU, NCCL and MPI versions
}

// Probe reads the machine; nv may be nil (no NVIDIA driver).
func Probe(nv nvlink.NVML) Machine {
	host, _ := os.Hostname()
	m := Machine{Hostname: host, CPU: strings.TrimSpace(cpuid.CPU.BrandName), Cores: runtime.NumCPU(), Node: nvlink.Read(nv)}
	m.NCCL = ncclVersion()
	m.MPI = mpiVersion()
	m.GPUKey = m.Key()
	m.Fingerprint = nvlink.Hash(strings.Join([]string{m.GPUKey, m.CPU, fmt.Sprint(m.Cores), m.NCCL, m.MPI}, "|"))
	return m
}

var ncclFile = regexp.MustCompile(`libnccl\.so\.(\d+\.\d+\.\d+)$`)

// ncclVersion finds the NCCL collmux would load (COLLMUX_NCCL_LIB or the
// system's libnccl.so.2) and reads its version from the file it points to.
func ncclVersion() string {
	candidates := []string{os.Getenv("COLLMUX_NCCL_LIB")}
	for _, dir := range []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/local/cuda/lib64", "/usr/lib/aarch64-linux-gnu"} {
		candidates = append(candidates, filepath.Join(dir, "libnccl.so.2"))
	}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if real, err := filepath.EvalSymlinks(c); err == nil {
			if m := ncclFile.FindStringSubmatch(real); m != nil {
				return m[1]
			}
			return filepath.Base(real)
		}
	}
	return ""
}

// mpiVersion asks the MPI launcher on PATH.
func mpiVersion() string {
	out, err := exec.Command("mpirun", "--version").CombinedOutput()
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(line)
}

// WriteTable prints the machine for people.
func (m Machine) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "host\t%s\n", m.Hostname)
	fmt.Fprintf(tw, "cpu\t%s (%d cores)\n", m.CPU, m.Cores)
	if len(m.GPUs) == 0 {
		fmt.Fprintf(tw, "gpus\tnone (no NVIDIA driver or no GPU)\n")
	} else {
		fmt.Fprintf(tw, "driver\t%s (CUDA %d.%d)\n", m.Driver, m.CUDA/1000, m.CUDA%1000/10)
		fmt.Fprintf(tw, "nvlink\t%s\n", map[bool]string{true: "every pair of GPUs", false: "partial or none"}[m.FullNVLink()])
	}
	fmt.Fprintf(tw, "nccl\t%s\n", orNone(m.NCCL))
	fmt.Fprintf(tw, "mpi\t%s\n", orNone(m.MPI))
	fmt.Fprintf(tw, "gpu key\t%s\n", m.GPUKey)
	fmt.Fprintf(tw, "fingerprint\t%s\n", m.Fingerprint)
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(m.GPUs) == 0 {
		return nil
	}
	// the NVLink matrix, as nvidia-smi topo -m shows it
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "\t")
	for _, g := range m.GPUs {
		fmt.Fprintf(tw, "GPU%d\t", g.Index)
	}
	fmt.Fprintln(tw, "name\tbus id")
	for a, g := range m.GPUs {
		fmt.Fprintf(tw, "GPU%d\t", g.Index)
		for b := range m.GPUs {
			switch n := m.LinksBetween(a, b); {
			case a == b:
				fmt.Fprint(tw, "X\t")
			case n > 0:
				fmt.Fprintf(tw, "NV%d\t", n)
			default:
				fmt.Fprint(tw, "-\t")
			}
		}
		fmt.Fprintf(tw, "%s\t%s\n", g.Name, g.BusID)
	}
	return tw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "not found"
	}
	return s
}

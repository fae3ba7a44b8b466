// Package topo describes the machine collmux runs on: its GPUs and the
// NVLinks between them (from NVML), its CPU (from cpuid), the NCCL and MPI
// it will use, and a fingerprint of all that which keys tuning tables: a
// table measured on one machine is only trusted on a machine with the same
// fingerprint.
package topo

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/klauspost/cpuid/v2"
)

// GPU is one device as NVML reports it.
type GPU struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
	BusID string `json:"bus_id"`
	// NVLinks counts active links to each other GPU, by its bus id.
	NVLinks map[string]int `json:"nvlinks,omitempty"`
}

// Machine is what collmux knows of the node.
type Machine struct {
	Hostname    string `json:"hostname"`
	CPU         string `json:"cpu"`
	Cores       int    `json:"cores"`
	Driver      string `json:"driver,omitempty"`
	CUDA        int    `json:"cuda_driver_version,omitempty"`
	GPUs        []GPU  `json:"gpus"`
	NCCL        string `json:"nccl,omitempty"`
	MPI         string `json:"mpi,omitempty"`
	GPUKey      string `json:"gpu_key"`     // GPUs, links and driver: what a tuning table must match
	Fingerprint string `json:"fingerprint"` // GPUKey plus CPU, NCCL and MPI versions
}

// NVML is the part of NVML topo asks. The real one wraps go-nvml;
// tests use recorded answers.
type NVML interface {
	Driver() (string, int, error)
	Count() (int, error)
	Device(i int) (name, busID string, err error)
	// Links lists the bus id of the remote end of each active NVLink of
	// device i.
	Links(i int) ([]string, error)
}

// Probe reads the machine. nv may be nil (no NVIDIA driver): the machine
// then has no GPUs, which is a valid answer, not an error.
func Probe(nv NVML) Machine {
	host, _ := os.Hostname()
	m := Machine{Hostname: host, CPU: strings.TrimSpace(cpuid.CPU.BrandName), Cores: runtime.NumCPU()}
	if nv != nil {
		m.addGPUs(nv)
	}
	m.NCCL = ncclVersion()
	m.MPI = mpiVersion()
	m.GPUKey, m.Fingerprint = m.keys()
	return m
}

func (m *Machine) addGPUs(nv NVML) {
	drv, cuda, err := nv.Driver()
	if err != nil {
		return
	}
	m.Driver, m.CUDA = drv, cuda
	n, err := nv.Count()
	if err != nil {
		return
	}
	for i := 0; i < n; i++ {
		name, bus, err := nv.Device(i)
		if err != nil {
			continue
		}
		g := GPU{Index: i, Name: name, BusID: normBus(bus)}
		if links, err := nv.Links(i); err == nil {
			for _, remote := range links {
				if g.NVLinks == nil {
					g.NVLinks = map[string]int{}
				}
				g.NVLinks[normBus(remote)]++
			}
		}
		m.GPUs = append(m.GPUs, g)
	}
}

// GPUKey is the part of the fingerprint a tuning table must match: GPU
// models, the NVLinks between them, and the driver. It asks only NVML
// (nil: no GPU), so it is cheap enough for an MPI process's start-up.
func GPUKey(nv NVML) string {
	var m Machine
	if nv != nil {
		m.addGPUs(nv)
	}
	k, _ := m.keys()
	return k
}

// normBus writes PCI bus ids one way: NVML gives 00000000:1B:00.0, CUDA
// 0000:1b:00.0.
func normBus(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if i := strings.Index(s, ":"); i > 4 {
		s = s[i-4:]
	}
	return s
}

// LinksBetween counts the NVLinks from GPU a to GPU b (by index).
func (m Machine) LinksBetween(a, b int) int {
	if a < 0 || b < 0 || a >= len(m.GPUs) || b >= len(m.GPUs) {
		return 0
	}
	return m.GPUs[a].NVLinks[m.GPUs[b].BusID]
}

// FullNVLink reports whether every pair of GPUs is joined by NVLink.
func (m Machine) FullNVLink() bool {
	for a := range m.GPUs {
		for b := range m.GPUs {
			if a != b && m.LinksBetween(a, b) == 0 {
				return false
			}
		}
	}
	return len(m.GPUs) > 0
}

func (m Machine) keys() (gpuKey, fingerprint string) {
	var parts []string
	for a, g := range m.GPUs {
		row := []string{g.Name}
		for b := range m.GPUs {
			row = append(row, fmt.Sprint(m.LinksBetween(a, b)))
		}
		parts = append(parts, strings.Join(row, ","))
	}
	sort.Strings(parts)
	gk := "no-gpu"
	if len(parts) > 0 {
		gk = hash(fmt.Sprintf("%s|driver %s", strings.Join(parts, ";"), m.Driver))
	}
	return gk, hash(strings.Join([]string{gk, m.CPU, fmt.Sprint(m.Cores), m.NCCL, m.MPI}, "|"))
}

func hash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:8])
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

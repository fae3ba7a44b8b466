// Package topo describes the machine collmux runs on for people and for
// tuning: its GPUs and NVLinks (package nvlink), its CPU (cpuid), the NCCL
// and MPI it will use, and a fingerprint of all that. Tuning tables record
// the fingerprint and are matched by the GPU key.
package topo

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/klauspost/cpuid/v2"

	"collmux/topo/nvlink"
)

// Machine is what collmux knows of the node.
type Machine struct {
	Hostname string     `json:"hostname"`
	CPU      string     `json:"cpu"`
	Cores    int        `json:"cores"`
	NUMA     []NUMANode `json:"numa,omitempty"`
	nvlink.Node
	NVLink      string         `json:"nvlink"`             // nvlink.Class: none, partial or full
	GPUNUMA     map[string]int `json:"gpu_numa,omitempty"` // the NUMA node each GPU (by bus id) hangs off; -1 unknown
	NCCL        string         `json:"nccl,omitempty"`
	MPI         string         `json:"mpi,omitempty"`
	GPUKey      string         `json:"gpu_key"`     // GPUs, links and driver: what a tuning table must match
	Fingerprint string         `json:"fingerprint"` // GPUKey plus CPU, NCCL and MPI versions
}

// Probe reads the machine; nv may be nil (no NVIDIA driver).
func Probe(nv nvlink.NVML) Machine {
	host, _ := os.Hostname()
	m := Machine{Hostname: host, CPU: strings.TrimSpace(cpuid.CPU.BrandName), Cores: runtime.NumCPU(), Node: nvlink.Read(nv)}
	m.NVLink = m.Class().String()
	m.NUMA, m.GPUNUMA = readNUMA(sysfs, m.GPUs)
	m.NCCL = ncclVersion()
	m.MPI = mpiVersion()
	m.GPUKey = m.Key()
	m.Fingerprint = nvlink.Hash(strings.Join([]string{m.GPUKey, m.CPU, fmt.Sprint(m.Cores), m.NCCL, m.MPI}, "|"))
	return m
}

// NUMANode is one NUMA node of the host and its CPUs (as Linux lists them).
type NUMANode struct {
	ID   int    `json:"id"`
	CPUs string `json:"cpus"`
}

// sysfs is where Linux describes NUMA nodes and PCI devices (tests point it
// at a recorded tree).
var sysfs = "/sys"

// readNUMA lists the NUMA nodes and finds each GPU's from its PCI device.
// Both are best effort: no sysfs (or a GPU it does not list) gives nothing
// (or -1), never an error.
func readNUMA(root string, gpus []nvlink.GPU) ([]NUMANode, map[string]int) {
	var nodes []NUMANode
	dirs, _ := filepath.Glob(filepath.Join(root, "devices/system/node/node[0-9]*"))
	for _, d := range dirs {
		id, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), "node"))
		if err != nil {
			continue
		}
		cpus, _ := os.ReadFile(filepath.Join(d, "cpulist"))
		nodes = append(nodes, NUMANode{id, strings.TrimSpace(string(cpus))})
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].ID < nodes[j].ID })
	var gpuNUMA map[string]int
	for _, g := range gpus {
		if gpuNUMA == nil {
			gpuNUMA = map[string]int{}
		}
		gpuNUMA[g.BusID] = -1
		b, err := os.ReadFile(filepath.Join(root, "bus/pci/devices", strings.ToLower(g.BusID), "numa_node"))
		if n, err2 := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && err2 == nil {
			gpuNUMA[g.BusID] = n
		}
	}
	return nodes, gpuNUMA
}

// WriteTable prints the machine for people.
func (m Machine) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "host\t%s\n", m.Hostname)
	fmt.Fprintf(tw, "cpu\t%s (%d cores)\n", m.CPU, m.Cores)
	if len(m.NUMA) > 0 {
		var parts []string
		for _, n := range m.NUMA {
			parts = append(parts, fmt.Sprintf("%d: cpus %s", n.ID, n.CPUs))
		}
		fmt.Fprintf(tw, "numa\t%d node(s): %s\n", len(m.NUMA), strings.Join(parts, "; "))
	}
	if len(m.GPUs) == 0 {
		fmt.Fprintf(tw, "gpus\tnone (no NVIDIA driver or no GPU)\n")
	} else {
		fmt.Fprintf(tw, "driver\t%s (CUDA %d.%d)\n", m.Driver, m.CUDA/1000, m.CUDA%1000/10)
		fmt.Fprintf(tw, "nvlink\t%s\n", map[nvlink.Class]string{nvlink.Full: "full (every pair of GPUs)", nvlink.Partial: "partial (some pairs of GPUs)", nvlink.None: "none"}[m.Class()])
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
	fmt.Fprintln(tw, "name\tbus id\tnuma")
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
		numa := "?"
		if n, ok := m.GPUNUMA[g.BusID]; ok && n >= 0 {
			numa = strconv.Itoa(n)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", g.Name, g.BusID, numa)
	}
	return tw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "not found"
	}
	return s
}

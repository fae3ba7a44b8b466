// Package nvlink turns NVML's answers about a node's GPUs and the NVLinks
// between them into a description and the GPU key tuning tables are
// matched by. It depends on nothing: the library asks NVML through its own
// dlopen (capi/nvml.c), the collmux tool through go-nvml (package topo).
package nvlink

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
)

// GPU is one device as NVML reports it.
type GPU struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
	BusID string `json:"bus_id"`
	// NVLinks counts active links to each other GPU, by its bus id.
	NVLinks map[string]int `json:"nvlinks,omitempty"`
}

// NVML is the part of NVML read here. The real one wraps go-nvml; tests
// use recorded answers.
type NVML interface {
	Driver() (string, int, error)
	Count() (int, error)
	Device(i int) (name, busID string, err error)
	// Links lists the bus id of the remote end of each active NVLink of
	// device i.
	Links(i int) ([]string, error)
	// NVLinkPeers reports whether NVML sees an NVLink path between
	// devices i and j (its P2P status for NVLink).
	NVLinkPeers(i, j int) (bool, error)
}

// Node is what NVML says of the node: driver and GPUs.
type Node struct {
	Driver string `json:"driver,omitempty"`
	CUDA   int    `json:"cuda_driver_version,omitempty"`
	GPUs   []GPU  `json:"gpus"`
}

// Read asks NVML; nv nil (no NVIDIA driver) or failing gives no GPUs,
// which is a valid answer, not an error.
func Read(nv NVML) Node {
	var n Node
	if nv == nil {
		return n
	}
	drv, cuda, err := nv.Driver()
	if err != nil {
		return n
	}
	n.Driver, n.CUDA = drv, cuda
	count, err := nv.Count()
	if err != nil {
		return n
	}
	for i := 0; i < count; i++ {
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
		n.GPUs = append(n.GPUs, g)
	}
	n.attributeUnmatched(nv)
	return n
}

// attributeUnmatched handles links whose remote end is no GPU of this
// node's view: in a virtual machine NVML reports the host's PCI ids, behind
// an NVSwitch the switch's. Such links are shared evenly among the peers
// NVML says are NVLink-connected and have no matched links yet.
func (n *Node) attributeUnmatched(nv NVML) {
	known := map[string]bool{}
	for _, g := range n.GPUs {
		known[g.BusID] = true
	}
	for a := range n.GPUs {
		g := &n.GPUs[a]
		spare := 0
		for bus, k := range g.NVLinks {
			if !known[bus] {
				spare += k
				delete(g.NVLinks, bus)
			}
		}
		var peers []int
		for b := range n.GPUs {
			if ok, err := nv.NVLinkPeers(a, b); b != a && err == nil && ok && g.NVLinks[n.GPUs[b].BusID] == 0 {
				peers = append(peers, b)
			}
		}
		for _, b := range peers {
			if share := spare / len(peers); share > 0 {
				g.NVLinks[n.GPUs[b].BusID] = share
			}
		}
	}
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
func (n Node) LinksBetween(a, b int) int {
	if a < 0 || b < 0 || a >= len(n.GPUs) || b >= len(n.GPUs) {
		return 0
	}
	return n.GPUs[a].NVLinks[n.GPUs[b].BusID]
}

// Class is how far NVLink joins a node's GPUs; rules can depend on it.
type Class int

const (
	None    Class = iota // no two GPUs joined (or fewer than two GPUs)
	Partial              // some pairs joined, not all
	Full                 // every pair joined directly
	NumClass
)

// ClassNames are the names rules and tools use, by Class.
var ClassNames = [...]string{"none", "partial", "full"}

func (c Class) String() string {
	if c >= 0 && c < NumClass {
		return ClassNames[c]
	}
	return fmt.Sprintf("Class(%d)", int(c))
}

// Class tells whether every pair of GPUs, some, or none is joined by NVLink.
func (n Node) Class() Class {
	pairs, linked := 0, 0
	for a := range n.GPUs {
		for b := range n.GPUs {
			if a < b {
				pairs++
				if n.LinksBetween(a, b) > 0 && n.LinksBetween(b, a) > 0 {
					linked++
				}
			}
		}
	}
	switch {
	case linked == 0:
		return None
	case linked == pairs:
		return Full
	}
	return Partial
}

// Key is what a tuning table must match: GPU models, the NVLinks between
// them, and the driver; "no-gpu" without GPUs.
func (n Node) Key() string {
	var parts []string
	for a, g := range n.GPUs {
		row := []string{g.Name}
		for b := range n.GPUs {
			row = append(row, fmt.Sprint(n.LinksBetween(a, b)))
		}
		parts = append(parts, strings.Join(row, ","))
	}
	if len(parts) == 0 {
		return "no-gpu"
	}
	sort.Strings(parts)
	return Hash(fmt.Sprintf("%s|driver %s", strings.Join(parts, ";"), n.Driver))
}

// Hash is the short digest keys and fingerprints are made of.
func Hash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:8])
}

package nvlink

import (
	"errors"
	"testing"
)

// recorded holds NVML's answers as read on a machine, so that decoding
// can be tested where no GPU exists.
type recorded struct {
	driver  string
	cuda    int
	devices [][2]string // name, bus id
	links   [][]string  // remote bus ids of each device's active links
	p2p     bool        // NVML's NVLink P2P status between any two devices
	err     error
}

func (r recorded) Driver() (string, int, error) { return r.driver, r.cuda, r.err }
func (r recorded) Count() (int, error)          { return len(r.devices), r.err }
func (r recorded) Device(i int) (string, string, error) {
	return r.devices[i][0], r.devices[i][1], nil
}
func (r recorded) Links(i int) ([]string, error)      { return r.links[i], nil }
func (r recorded) NVLinkPeers(i, j int) (bool, error) { return r.p2p, nil }

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// The 2 x H200 machine: nvidia-smi topo -m shows NV18 between the GPUs.
var h200x2 = recorded{
	driver: "580.159.04", cuda: 13000,
	devices: [][2]string{{"NVIDIA H200", "00000000:1B:00.0"}, {"NVIDIA H200", "00000000:43:00.0"}},
	links:   [][]string{repeat("00000000:43:00.0", 18), repeat("00000000:1B:00.0", 18)},
}

func TestDecodeRecordedNVML(t *testing.T) {
	m := Read(h200x2)
	if len(m.GPUs) != 2 || m.GPUs[1].BusID != "0000:43:00.0" {
		t.Fatalf("GPUs: %+v", m.GPUs)
	}
	if m.LinksBetween(0, 1) != 18 || m.LinksBetween(1, 0) != 18 || m.LinksBetween(0, 0) != 0 {
		t.Errorf("links: %d %d", m.LinksBetween(0, 1), m.LinksBetween(1, 0))
	}
	if m.Class() != Full {
		t.Error("two GPUs joined by 18 links are fully connected")
	}
}

func TestKeys(t *testing.T) {
	a := Read(h200x2)
	partial := h200x2
	partial.links = [][]string{repeat("00000000:43:00.0", 12), repeat("00000000:1B:00.0", 12)}
	newDriver := h200x2
	newDriver.driver = "590.1"
	for name, other := range map[string]recorded{"fewer links": partial, "another driver": newDriver} {
		if Read(other).Key() == a.Key() {
			t.Errorf("%s: same GPU key", name)
		}
	}
	if Read(h200x2).Key() != a.Key() {
		t.Error("GPU key not stable")
	}
	none := Read(nil)
	if none.Key() != "no-gpu" || len(none.GPUs) != 0 || none.Class() != None {
		t.Errorf("no NVML: %+v", none)
	}
	broken := Read(recorded{err: errors.New("driver gone")})
	if len(broken.GPUs) != 0 {
		t.Error("an NVML error must leave no GPUs")
	}
}

func TestNormBus(t *testing.T) {
	for in, want := range map[string]string{"00000000:1B:00.0": "0000:1b:00.0", "0000:1b:00.0": "0000:1b:00.0"} {
		if got := normBus(in); got != want {
			t.Errorf("normBus(%q) = %q", in, got)
		}
	}
}

// As NVML answered inside the 2 x H200 virtual machine: the GPUs sit at
// 00:06.0 and 00:07.0 but each one's 18 links report the host's PCI id of
// the other; the P2P status says NVLink. nvidia-smi topo -m shows NV18.
func TestDecodeRecordedVMNVML(t *testing.T) {
	vm := recorded{
		driver: "580.159.04", cuda: 13000, p2p: true,
		devices: [][2]string{{"NVIDIA H200", "00000000:00:06.0"}, {"NVIDIA H200", "00000000:00:07.0"}},
		links:   [][]string{repeat("00000000:43:00.0", 18), repeat("00000000:1B:00.0", 18)},
	}
	m := Read(vm)
	if m.LinksBetween(0, 1) != 18 || m.LinksBetween(1, 0) != 18 || m.Class() != Full {
		t.Errorf("links in a VM: %+v", m.GPUs)
	}
	if m.Key() != Read(h200x2).Key() {
		t.Error("the same GPUs and links must give the same key inside and outside a VM")
	}
	vm.p2p = false
	if Read(vm).Class() != None {
		t.Error("without an NVLink P2P path, unmatched links connect nothing")
	}
}

// Four GPUs in two NVLink-bridged pairs (0-1, 2-3): partial; one GPU: none.
func TestClass(t *testing.T) {
	bus := []string{"00000000:01:00.0", "00000000:02:00.0", "00000000:03:00.0", "00000000:04:00.0"}
	pairs := recorded{driver: "580", cuda: 13000,
		devices: [][2]string{{"A", bus[0]}, {"A", bus[1]}, {"A", bus[2]}, {"A", bus[3]}},
		links:   [][]string{repeat(bus[1], 4), repeat(bus[0], 4), repeat(bus[3], 4), repeat(bus[2], 4)},
	}
	single := recorded{driver: "580", cuda: 13000, devices: [][2]string{{"A", bus[0]}}, links: [][]string{nil}}
	for _, tc := range []struct {
		name string
		nv   NVML
		want Class
	}{{"2 x H200", h200x2, Full}, {"bridged pairs", pairs, Partial}, {"one GPU", single, None}, {"no NVML", nil, None}} {
		if got := Read(tc.nv).Class(); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

package topo

import (
	"strings"
	"testing"

	"collmux/topo/nvlink"
)

// a 2-GPU machine with NV18 between the GPUs, as NVML answered on the H200 host
type twoGPUs struct{}

func (twoGPUs) Driver() (string, int, error) { return "580.159.04", 13000, nil }
func (twoGPUs) Count() (int, error)          { return 2, nil }
func (twoGPUs) Device(i int) (string, string, error) {
	return "NVIDIA H200", []string{"00000000:1B:00.0", "00000000:43:00.0"}[i], nil
}
func (twoGPUs) Links(i int) ([]string, error) {
	out := make([]string, 18)
	for k := range out {
		out[k] = []string{"00000000:43:00.0", "00000000:1B:00.0"}[i]
	}
	return out, nil
}

func (twoGPUs) NVLinkPeers(i, j int) (bool, error) { return true, nil }

var _ nvlink.NVML = twoGPUs{}

func TestProbeAndTable(t *testing.T) {
	m := Probe(twoGPUs{})
	if m.Cores < 1 || m.GPUKey != m.Key() || m.Fingerprint == "" || m.Fingerprint == m.GPUKey {
		t.Errorf("machine: %+v", m)
	}
	var b strings.Builder
	if err := m.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NV18", "580.159.04", "full (every pair of GPUs)", m.GPUKey} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	if Probe(nil).GPUKey != "no-gpu" {
		t.Error("no GPU")
	}
}

// NUMA facts from a recorded sysfs: two nodes, GPU 0 on node 0, GPU 1's
// device missing (unknown, not an error); no sysfs at all gives nothing.
func TestNUMA(t *testing.T) {
	defer func(old string) { sysfs = old }(sysfs)
	sysfs = "testdata/sys"
	m := Probe(twoGPUs{})
	if len(m.NUMA) != 2 || m.NUMA[1] != (NUMANode{1, "16-31"}) {
		t.Errorf("NUMA nodes: %+v", m.NUMA)
	}
	if m.GPUNUMA["0000:1b:00.0"] != 0 || m.GPUNUMA["0000:43:00.0"] != -1 {
		t.Errorf("GPU NUMA: %v", m.GPUNUMA)
	}
	var b strings.Builder
	if err := m.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2 node(s): 0: cpus 0-15; 1: cpus 16-31", "0000:1b:00.0  0", "0000:43:00.0  ?"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	sysfs = t.TempDir()
	if m := Probe(twoGPUs{}); m.NUMA != nil || m.GPUNUMA["0000:1b:00.0"] != -1 {
		t.Errorf("without sysfs: %+v %v", m.NUMA, m.GPUNUMA)
	}
}

// ncclGetVersion's numbers in both of NCCL's encodings.
func TestNCCLCode(t *testing.T) {
	for _, tc := range []struct {
		code int
		want string
	}{
		{22803, "2.28.3"}, // since 2.9: major*10000 + minor*100 + patch
		{20900, "2.9.0"},
		{2708, "2.7.8"}, // before: major*1000 + minor*100 + patch
	} {
		if got := ncclCode(tc.code); got != tc.want {
			t.Errorf("ncclCode(%d) = %q, want %q", tc.code, got, tc.want)
		}
	}
}

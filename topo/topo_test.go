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
	for _, want := range []string{"NV18", "580.159.04", "every pair of GPUs", m.GPUKey} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	if Probe(nil).GPUKey != "no-gpu" {
		t.Error("no GPU")
	}
}

package topo

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"collmux/topo/nvlink"
)

// SystemNVML opens the NVIDIA driver's NVML through go-nvml; nil when
// there is none. Close it with Shutdown.
func SystemNVML() nvlink.NVML {
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		return nil
	}
	return system{}
}

// Shutdown releases NVML if SystemNVML opened it.
func Shutdown(nv nvlink.NVML) {
	if _, ok := nv.(system); ok {
		nvml.Shutdown()
	}
}

type system struct{}

func check(ret nvml.Return) error {
	if ret != nvml.SUCCESS {
		return fmt.Errorf("nvml: %s", nvml.ErrorString(ret))
	}
	return nil
}

func (system) Driver() (string, int, error) {
	v, ret := nvml.SystemGetDriverVersion()
	if err := check(ret); err != nil {
		return "", 0, err
	}
	cuda, _ := nvml.SystemGetCudaDriverVersion()
	return v, cuda, nil
}

func (system) Count() (int, error) {
	n, ret := nvml.DeviceGetCount()
	return n, check(ret)
}

func (system) Device(i int) (string, string, error) {
	d, ret := nvml.DeviceGetHandleByIndex(i)
	if err := check(ret); err != nil {
		return "", "", err
	}
	name, ret := d.GetName()
	if err := check(ret); err != nil {
		return "", "", err
	}
	pci, ret := d.GetPciInfo()
	return name, busID(pci), check(ret)
}

func (system) Links(i int) ([]string, error) {
	d, ret := nvml.DeviceGetHandleByIndex(i)
	if err := check(ret); err != nil {
		return nil, err
	}
	var remotes []string
	for l := 0; l < nvml.NVLINK_MAX_LINKS; l++ {
		state, ret := d.GetNvLinkState(l)
		if ret != nvml.SUCCESS || state != nvml.FEATURE_ENABLED {
			continue
		}
		if pci, ret := d.GetNvLinkRemotePciInfo(l); ret == nvml.SUCCESS {
			remotes = append(remotes, busID(pci))
		}
	}
	return remotes, nil
}

func busID(p nvml.PciInfo) string {
	b := make([]byte, 0, len(p.BusId))
	for _, c := range p.BusId {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}

func (system) NVLinkPeers(i, j int) (bool, error) {
	a, ret := nvml.DeviceGetHandleByIndex(i)
	if err := check(ret); err != nil {
		return false, err
	}
	b, ret := nvml.DeviceGetHandleByIndex(j)
	if err := check(ret); err != nil {
		return false, err
	}
	st, ret := a.GetP2PStatus(b, nvml.P2P_CAPS_INDEX_NVLINK)
	return st == nvml.P2P_STATUS_OK, check(ret)
}

//go:build collmux_lib

package main

/*
#include "cmx.h"
int cmx_nvml_open(void);
void cmx_nvml_close(void);
int cmx_nvml_driver(char *buf, int len, int *cuda);
int cmx_nvml_count(void);
int cmx_nvml_device(int i, char *name, int nlen, char *bus, int blen);
int cmx_nvml_link(int i, int link, char *bus, int blen);
int cmx_nvml_nvlink_peers(int i, int j);
*/
import "C"

import (
	"errors"
	"sync"

	"collmux/topo/nvlink"
)

// cNVML answers nvlink's questions through capi/nvml.c (NVML by dlopen).
type cNVML struct{}

var errNVML = errors.New("nvml query failed")

func cstr(buf []C.char) string { return C.GoString(&buf[0]) }

func (cNVML) Driver() (string, int, error) {
	var buf [96]C.char
	var cuda C.int
	if C.cmx_nvml_driver(&buf[0], C.int(len(buf)), &cuda) == 0 {
		return "", 0, errNVML
	}
	return cstr(buf[:]), int(cuda), nil
}

func (cNVML) Count() (int, error) {
	n := int(C.cmx_nvml_count())
	if n < 0 {
		return 0, errNVML
	}
	return n, nil
}

func (cNVML) Device(i int) (string, string, error) {
	var name [96]C.char
	var bus [32]C.char
	if C.cmx_nvml_device(C.int(i), &name[0], C.int(len(name)), &bus[0], C.int(len(bus))) == 0 {
		return "", "", errNVML
	}
	return cstr(name[:]), cstr(bus[:]), nil
}

func (cNVML) Links(i int) ([]string, error) {
	var out []string
	var bus [32]C.char
	for l := 0; l < 64; l++ {
		switch C.cmx_nvml_link(C.int(i), C.int(l), &bus[0], C.int(len(bus))) {
		case 1:
			out = append(out, cstr(bus[:]))
		case -1:
			return out, nil
		}
	}
	return out, nil
}

func (cNVML) NVLinkPeers(i, j int) (bool, error) {
	switch C.cmx_nvml_nvlink_peers(C.int(i), C.int(j)) {
	case 1:
		return true, nil
	case 0:
		return false, nil
	}
	return false, errNVML
}

// systemNode is this node's GPUs and NVLinks, read through NVML (when the
// driver has it) the first time it is needed.
var systemNode = sync.OnceValue(func() nvlink.Node {
	if C.cmx_nvml_open() == 0 {
		return nvlink.Read(nil)
	}
	defer C.cmx_nvml_close()
	return nvlink.Read(cNVML{})
})

// systemGPUKey is this machine's GPU key.
func systemGPUKey() string { return systemNode().Key() }

// collmux_go_node_nvlink is this node's NVLink class (nvlink.Class), for
// rules with an nvlink condition.
//
//export collmux_go_node_nvlink
func collmux_go_node_nvlink() C.int { return C.int(systemNode().Class()) }

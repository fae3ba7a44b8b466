module collmux

go 1.26.8

require (
	github.com/NVIDIA/go-nvml v0.13.4-1
	github.com/klauspost/cpuid/v2 v2.4.2
)

require golang.org/x/sys v0.46.0 // indirect

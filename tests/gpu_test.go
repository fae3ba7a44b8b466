package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The GPU suite (scripts/gpu-test.sh: device buffers on every collective
// through NCCL, staged and fused paths, COLLMUX_CHECK, the watchdog,
// mpi4py with CuPy) runs where there is an NVIDIA GPU and says "skipped"
// elsewhere, as on CI. Its dated results live in docs/results/.
func TestGPUSuite(t *testing.T) {
	if _, err := exec.LookPath("nvidia-smi"); err != nil {
		t.Skip("skipped: no NVIDIA GPU here (nvidia-smi not found); the GPU suite is scripts/gpu-test.sh")
	}
	if out, err := exec.Command("nvidia-smi", "-L").Output(); err != nil || !strings.Contains(string(out), "GPU 0") {
		t.Skip("skipped: nvidia-smi lists no GPU")
	}
	cmd := exec.Command("bash", filepath.Join(repoRoot(), "scripts", "gpu-test.sh"))
	cmd.Env = append(os.Environ(), "BENCH=0", "OUT="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("GPU suite failed: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), " 0 failed") {
		t.Fatalf("GPU suite output:\n%s", out)
	}
}

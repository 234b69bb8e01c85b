package collector

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// TestBuildsWithoutCgo: with CGO_ENABLED=0 the collector still builds (the
// CUDA clock reports ErrNoCUDA; host and virtual clocks work).
func TestBuildsWithoutCgo(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		goTool = "go"
	}
	cmd := exec.Command(goTool, "vet", ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go vet: %v\n%s", err, out)
	}
}

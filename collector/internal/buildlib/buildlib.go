// Package buildlib builds the collector's shared library and the ppprof
// command for tests that run them from other languages. Tests only.
package buildlib

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// GoTool returns the go command of the toolchain running the tests.
func GoTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

var (
	rootOnce sync.Once
	root     string
	rootErr  error
)

// ModuleRoot returns the directory of the ppprof module's go.mod.
func ModuleRoot() (string, error) {
	rootOnce.Do(func() {
		out, err := exec.Command(GoTool(), "env", "GOMOD").Output()
		if err != nil {
			rootErr = fmt.Errorf("go env GOMOD: %w", err)
			return
		}
		mod := strings.TrimSpace(string(out))
		if mod == "" || mod == os.DevNull {
			rootErr = fmt.Errorf("not inside the ppprof module")
			return
		}
		root = filepath.Dir(mod)
	})
	return root, rootErr
}

// build runs go build with args in the module root.
func build(args ...string) error {
	dir, err := ModuleRoot()
	if err != nil {
		return err
	}
	cmd := exec.Command(GoTool(), append([]string{"build"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// SharedLibrary builds libppprof.so (the C ABI) into dir and returns its
// path. It needs cgo and a C compiler.
func SharedLibrary(dir string) (string, error) {
	lib := filepath.Join(dir, "libppprof.so")
	return lib, build("-buildmode=c-shared", "-o", lib, "./collector/capi")
}

// Command builds the ppprof command into dir and returns its path.
func Command(dir string) (string, error) {
	exe := filepath.Join(dir, "ppprof")
	return exe, build("-o", exe, "./cmd/ppprof")
}

// CCompiler returns $CC or gcc if it is installed, or "".
func CCompiler() string {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		return ""
	}
	return cc
}

//go:build unix

package main

import (
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestMain lets a test run ppprof as a process of its own: the test
// binary, re-executed with PPPROF_TEST_MAIN=1, is ppprof given its
// arguments.
func TestMain(m *testing.M) {
	if os.Getenv("PPPROF_TEST_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestSignalRemovesSpooled interrupts `ppprof analyze -` while it copies
// standard input (a writer that has sent part of a trace and not closed
// the pipe) with each signal that ends a run: the process dies of the
// signal, as it would have without ppprof's handler (the shell's 130 for
// Ctrl-C), and the copy it was writing is gone from TMPDIR.
func TestSignalRemovesSpooled(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	trace := filepath.Join(t.TempDir(), "t.arrow")
	simulateTo(t, trace, "--stages", "4", "--microbatches", "8")
	data, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			if signal.Ignored(sig) {
				t.Skipf("%v is ignored here, and so in ppprof (nohup?)", sig)
			}
			tmp := t.TempDir()
			cmd := exec.Command(exe, "analyze", "-")
			cmd.Env = append(os.Environ(), "PPPROF_TEST_MAIN=1", "TMPDIR="+tmp)
			in, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			in.Write(data[:len(data)/2])
			// Wait for the copy to hold what was sent.
			deadline := time.Now().Add(time.Minute)
			for !copied(tmp, int64(len(data)/2)) {
				if time.Now().After(deadline) {
					t.Fatal("no copy of standard input in TMPDIR after a minute")
				}
				time.Sleep(10 * time.Millisecond)
			}
			cmd.Process.Signal(sig)
			kill := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() })
			defer kill.Stop()
			err = cmd.Wait()
			ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if !ws.Signaled() || ws.Signal() != sig {
				t.Errorf("ppprof ended with %v, want to die of %v", err, sig)
			}
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				t.Errorf("left in TMPDIR: %v", left)
			}
		})
	}
}

// copied reports whether the one directory in tmp holds a file of at
// least n bytes.
func copied(tmp string, n int64) bool {
	dirs, _ := os.ReadDir(tmp)
	for _, d := range dirs {
		files, _ := os.ReadDir(filepath.Join(tmp, d.Name()))
		for _, f := range files {
			if st, err := f.Info(); err == nil && st.Size() >= n {
				return true
			}
		}
	}
	return false
}

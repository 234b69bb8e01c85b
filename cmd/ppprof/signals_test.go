//go:build unix

package main

import (
	"bufio"
	"fmt"
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
	switch os.Getenv("PPPROF_TEST_MAIN") {
	case "1":
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	case "temp": // an output half written: see TestSignalRemovesTemp
		defer cleanupOnSignal()()
		if _, err := createTemp(os.Args[1]); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("ready")
		time.Sleep(time.Minute)
		os.Exit(1)
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

// TestSignalRemovesTemp ends a process writing an output (its temporary
// file made, not yet renamed into place) with SIGTERM: it dies of the
// signal, and the temporary file is gone.
func TestSignalRemovesTemp(t *testing.T) {
	if signal.Ignored(syscall.SIGTERM) {
		t.Skip("SIGTERM is ignored here")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(exe, dir)
	cmd.Env = append(os.Environ(), "PPPROF_TEST_MAIN=temp")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		t.Fatalf("child said %q", line)
	}
	if made, _ := os.ReadDir(dir); len(made) != 1 {
		t.Fatalf("the child made %v, want one temporary file", made)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	err = cmd.Wait()
	if ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("child ended with %v, want to die of SIGTERM", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("left: %v", left)
	}
}

// TestOutputMode: the files simulate, convert and report write are
// readable by all (0644), as a file os.Create makes under the usual umask
// is; they were written to a temporary file (0600) renamed into place, and
// those of simulate and convert kept its mode, unreadable to the
// colleagues a trace is written for. Nothing else is left in the
// directory.
func TestOutputMode(t *testing.T) {
	dir := t.TempDir()
	tr, conv, html := filepath.Join(dir, "t.arrow"), filepath.Join(dir, "c.arrow"), filepath.Join(dir, "r.html")
	simulateTo(t, tr, "--stages", "2", "--microbatches", "4")
	if _, stderr, code := ppprof(t, "convert", tr, "-o", conv); code != 0 {
		t.Fatalf("convert: exit %d: %s", code, stderr)
	}
	if _, stderr, code := ppprof(t, "report", tr, "--html", html); code != 0 {
		t.Fatalf("report: exit %d: %s", code, stderr)
	}
	for _, p := range []string{tr, conv, html} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %v, want 0644", filepath.Base(p), st.Mode().Perm())
		}
	}
	if all, _ := os.ReadDir(dir); len(all) != 3 {
		t.Errorf("directory holds %v, want the three outputs only", all)
	}
}

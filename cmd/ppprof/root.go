package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Exit codes (DESIGN.md "Contracts").
const (
	exitOK        = 0
	exitError     = 1 // bad input or usage, with a message naming file and reason
	exitFailOn    = 3 // a --fail-on threshold was crossed
	exitHangFound = 4 // hang found a deadlock, stall or mismatch
)

// exitCodeError carries a non-error exit code (3, 4) up to run.
type exitCodeError struct {
	code int
	msg  string
}

func (e *exitCodeError) Error() string { return e.msg }

// run is the whole program: it parses args, runs one command, prints errors
// to stderr and maps them to the exit code. It is the one place that does so.
func run(args []string, stdout, stderr io.Writer) int {
	defer cleanupOnSignal()()
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	var ec *exitCodeError
	if errors.As(err, &ec) {
		if ec.msg != "" {
			fmt.Fprintln(stderr, "ppprof:", ec.msg)
		}
		return ec.code
	}
	fmt.Fprintln(stderr, "ppprof:", err)
	return exitError
}

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "ppprof",
		Short: "Profile and diagnose pipeline-parallel training",
		Long: `ppprof explains where a pipeline-parallel training step's time went
(bubble, stage imbalance, compute efficiency) and why a hung job hangs.

Every command that reads traces takes files, directories and globs, and "-"
for standard input; the files of many ranks merge into one trace. Formats are sniffed by content: Arrow IPC
file or stream (as the collector writes), CSV, JSONL, optionally gzipped.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(
		newCmdSimulate(stdout, stderr),
		newCmdConvert(stdout, stderr),
		newCmdAnalyze(stdout, stderr),
		newCmdDiff(stdout, stderr),
		newCmdHang(stdout, stderr),
		newCmdReport(stdout, stderr),
		newCmdExport(stdout, stderr),
		newCmdDemo(stdout, stderr),
		newCmdWhatIf(stdout, stderr),
		newCmdPartition(stdout, stderr),
	)
	return root
}

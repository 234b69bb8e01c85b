package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ppprof/ppprof/ingest"
	"github.com/ppprof/ppprof/trace"
)

// stdin is what "-" among a command's paths reads (a variable for the
// tests).
var stdin = os.Stdin

// readingArgs is the RunE of a command that reads the traces its
// arguments name: "-" (standard input) and pipes (a shell's <(command))
// among them are first copied to temporary files (ingest.Spool), which
// are removed when run returns, or when a signal ends the process
// (cleanupOnSignal).
// While a large input is copied, a progress line on stderr (when it is a
// terminal and --quiet is not given) says how much and how fast.
func readingArgs(run func(args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		quiet, _ := cmd.Flags().GetBool("quiet")
		prog := newProgress(cmd.ErrOrStderr(), "copying", 0, "MB", quiet)
		release, err := ingest.Spool(args, stdin, func(path string, total int64) {
			prog.update(func() {
				prog.cur, prog.bytes, prog.note = total/1e6, total, "of "+path+" to a temporary file (it can be read only once)"
			})
		})
		prog.done()
		defer release()
		if err != nil {
			return err
		}
		return run(args)
	}
}

// machineMemory is the machine's RAM in bytes, 0 when unknown (a variable
// for the tests).
var machineMemory = memTotalBytes

// checkFitsWhole fails, before anything is decoded, when the Arrow files
// paths name hold more events than the machine's memory takes in the
// model alone (trace.RowBytes an event, before any analysis): read whole,
// they would end in the kernel's out-of-memory killer after minutes of
// work. hint says what to do instead. An input whose events cannot be
// counted from its headers (other formats, unreadable files: Open says
// what is wrong with those) is let through.
func checkFitsWhole(paths []string, hint string) error {
	ram := machineMemory()
	if ram <= 0 {
		return nil
	}
	rows, exact, err := ingest.CountRows(paths)
	if err != nil {
		return nil
	}
	if !exact {
		return checkFRFits(paths)
	}
	if rows*trace.RowBytes <= ram {
		return nil
	}
	return fmt.Errorf("%s: %d events need at least %s read whole (%d bytes an event before any analysis), more than this machine's %s of memory: %s",
		describePaths(paths), rows, gib(rows*trace.RowBytes), trace.RowBytes, gib(ram), hint)
}

// frPeakPerByte is the least memory reading Flight Recorder dumps whole
// takes, per byte of the dumps, with a margin: 0.96-1.1 measured in the
// twenty-third session (a hung 4096-rank job's pickles, 1.3 GB: 1.43-1.45
// GB peak; 16384 ranks', 6.1 GB: 5.5-5.9 GB; their rows in huge-page
// slabs since), 1.55-2.2 in the fourteenth (docs/performance-history.md).
// A refusal must be sure: a bound over what a read takes would turn away
// dumps that fit.
const frPeakPerByte = 0.9

// checkFRFits fails, before anything is decoded, when paths name Flight
// Recorder dumps (as the first file is) that need more than the machine's
// memory read whole, as every command reads them: they cannot be
// streamed, and would end in the kernel's out-of-memory killer after
// minutes of work.
func checkFRFits(paths []string) error {
	ram := machineMemory()
	if ram <= 0 {
		return nil
	}
	switch ingest.FirstFormat(paths) {
	case ingest.FormatFRPickle, ingest.FormatFRJSON:
	default:
		return nil
	}
	size, err := ingest.InputBytes(paths)
	if err != nil {
		return nil // Open says what is wrong
	}
	need := int64(float64(size) * frPeakPerByte)
	if need <= ram {
		return nil
	}
	return fmt.Errorf("%s: %s of Flight Recorder dumps need at least %s read whole (%.1f times their size; dumps cannot be streamed), more than this machine's %s of memory: run on a machine with more memory",
		describePaths(paths), gib(size), gib(need), frPeakPerByte, gib(ram))
}

// gib shows a size in GiB.
func gib(b int64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }

func describePaths(paths []string) string {
	if len(paths) <= 3 {
		return strings.Join(paths, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(paths[:2], ", "), len(paths)-2)
}

// Command ppprof profiles and diagnoses pipeline-parallel training jobs.
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

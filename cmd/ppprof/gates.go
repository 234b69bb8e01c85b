package main

import (
	"bytes"
	"fmt"
	"io"

	"github.com/ppprof/ppprof/analyze"
	"github.com/ppprof/ppprof/internal/gate"
	"github.com/ppprof/ppprof/report"
)

// parseGates parses every --fail-on expression up front, so a typo fails
// before any work is done.
func parseGates(exprs []string) ([]gate.Expr, error) {
	var out []gate.Expr
	for _, s := range exprs {
		e, err := gate.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("--fail-on: %w", err)
		}
		out = append(out, e)
	}
	return out, nil
}

// analysisValues renders rep as the JSON contract and flattens its numbers,
// so gates name exactly what users see in `analyze --format json`.
func analysisValues(rep *analyze.Report) (gate.Values, []byte, error) {
	var buf bytes.Buffer
	if err := report.Write(&buf, rep, report.JSON); err != nil {
		return nil, nil, err
	}
	vals, err := gate.Flatten(buf.Bytes())
	return vals, buf.Bytes(), err
}

// checkGates evaluates gates on vals, prints each crossing to stderr and
// returns an exit-3 error when any crossed.
func checkGates(gates []gate.Expr, vals gate.Values, stderr io.Writer) error {
	var crossed []string
	for _, g := range gates {
		hit, v, err := g.Eval(vals)
		if err != nil {
			return err
		}
		if hit {
			crossed = append(crossed, fmt.Sprintf("%s (%s = %.6g)", g.Text, g.Path, v))
		}
	}
	return gateError(crossed, stderr)
}

func gateError(crossed []string, stderr io.Writer) error {
	if len(crossed) == 0 {
		return nil
	}
	for _, c := range crossed {
		fmt.Fprintf(stderr, "ppprof: --fail-on crossed: %s\n", c)
	}
	return &exitCodeError{code: exitFailOn}
}

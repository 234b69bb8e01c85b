// Package gate evaluates CI thresholds ("bubble>0.3", "step_ms>5%") on the
// numbers of a JSON analysis.
package gate

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Values are the numbers of a JSON document by dotted path:
// "bubble.measured", "stages.2.busy_ms". A JSON null is present with a nil
// value (the number is unknown for this trace).
type Values map[string]*float64

// Flatten collects every number (and null) of a JSON object by path.
// Booleans and strings are skipped.
func Flatten(doc []byte) (Values, error) {
	var v any
	dec := json.NewDecoder(strings.NewReader(string(doc)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("reading analysis JSON: %w", err)
	}
	out := Values{}
	flatten("", v, out)
	return out, nil
}

func flatten(prefix string, v any, out Values) {
	join := func(k string) string {
		if prefix == "" {
			return k
		}
		return prefix + "." + k
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			flatten(join(k), e, out)
		}
	case []any:
		for i, e := range x {
			flatten(join(strconv.Itoa(i)), e, out)
		}
	case json.Number:
		if f, err := x.Float64(); err == nil {
			out[prefix] = &f
		}
	case nil:
		out[prefix] = nil
	}
}

// Aliases are the short names users write, mapped to their JSON paths.
var Aliases = map[string]string{
	"bubble":      "bubble.measured",
	"balance":     "utilization.balance",
	"utilization": "utilization.pipeline",
	"pipeline":    "utilization.pipeline",
	"compute":     "utilization.compute",
	"mfu":         "utilization.mfu",
	"exposed_p2p": "p2p.exposed_ms",
}

// Expr is one threshold: Name Op Value, e.g. bubble > 0.3. With Percent, the
// value is a relative change in percent (only meaningful in a diff).
type Expr struct {
	Text    string // as the user wrote it
	Name    string // as written
	Path    string // the JSON path Name resolves to
	Op      string // one of > >= < <= == !=
	Value   float64
	Percent bool
}

var ops = []string{">=", "<=", "==", "!=", ">", "<"}

// Parse reads "NAME OP NUMBER[%]".
func Parse(s string) (Expr, error) {
	e := Expr{Text: s}
	for _, op := range ops {
		if i := strings.Index(s, op); i > 0 {
			e.Name = strings.TrimSpace(s[:i])
			e.Op = op
			num := strings.TrimSpace(s[i+len(op):])
			if strings.HasSuffix(num, "%") {
				e.Percent = true
				num = strings.TrimSpace(strings.TrimSuffix(num, "%"))
			}
			v, err := strconv.ParseFloat(num, 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return e, fmt.Errorf("threshold %q: %q is not a number", s, num)
			}
			e.Value = v
			break
		}
	}
	if e.Op == "" || e.Name == "" {
		return e, fmt.Errorf("threshold %q: want NAME OP NUMBER, e.g. 'bubble>0.3' (OP is one of > >= < <= == !=)", s)
	}
	for _, r := range e.Name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.') {
			return e, fmt.Errorf("threshold %q: name %q: only letters, digits, '_' and '.' are allowed", s, e.Name)
		}
	}
	e.Path = e.Name
	if p, ok := Aliases[e.Name]; ok {
		e.Path = p
	}
	return e, nil
}

func (e Expr) crossed(x float64) bool {
	switch e.Op {
	case ">":
		return x > e.Value
	case ">=":
		return x >= e.Value
	case "<":
		return x < e.Value
	case "<=":
		return x <= e.Value
	case "==":
		return x == e.Value
	case "!=":
		return x != e.Value
	}
	return false
}

// lookup finds e's number in vals, with an error naming what is wrong.
func (e Expr) lookup(vals Values) (float64, error) {
	v, ok := vals[e.Path]
	if !ok {
		return 0, fmt.Errorf("threshold %q: unknown name %q (known: %s, or any numeric JSON path such as stages.0.busy_ms)",
			e.Text, e.Name, strings.Join(knownNames(vals), ", "))
	}
	if v == nil {
		return 0, fmt.Errorf("threshold %q: %s is unknown for this trace (null in the analysis)", e.Text, e.Path)
	}
	return *v, nil
}

// Eval reports whether the threshold is crossed by the values of one
// analysis, and the value it compared. A percent threshold is an error here.
func (e Expr) Eval(vals Values) (bool, float64, error) {
	if e.Percent {
		return false, 0, fmt.Errorf("threshold %q: a percentage only makes sense in `ppprof diff`", e.Text)
	}
	x, err := e.lookup(vals)
	if err != nil {
		return false, 0, err
	}
	return e.crossed(x), x, nil
}

// EvalDiff reports whether the change from base to cur crosses the
// threshold: the absolute change (cur - base), or with Percent the relative
// change in percent. It returns the change it compared.
func (e Expr) EvalDiff(base, cur Values) (bool, float64, error) {
	b, err := e.lookup(base)
	if err != nil {
		return false, 0, fmt.Errorf("baseline: %w", err)
	}
	c, err := e.lookup(cur)
	if err != nil {
		return false, 0, err
	}
	d := c - b
	if e.Percent {
		if b == 0 {
			if d == 0 {
				return e.crossed(0), 0, nil
			}
			return false, 0, fmt.Errorf("threshold %q: baseline %s is 0, a relative change is undefined", e.Text, e.Path)
		}
		d = 100 * d / math.Abs(b)
	}
	return e.crossed(d), d, nil
}

// knownNames lists the aliases and the top-level scalar paths, sorted.
func knownNames(vals Values) []string {
	var names []string
	for a := range Aliases {
		names = append(names, a)
	}
	for k := range vals {
		if !strings.Contains(k, ".") {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	return names
}

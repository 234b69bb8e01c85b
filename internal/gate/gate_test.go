package gate

import (
	"strings"
	"testing"
)

const doc = `{"schema":"ppprof.analysis/v1","step_ms":1000,"utilization":{"pipeline":0.6,"balance":0.9,"mfu":null},
"bubble":{"measured":0.3},"stages":[{"busy_ms":5},{"busy_ms":7}],"job":{"schedule":"1f1b"}}`

func TestEval(t *testing.T) {
	vals, err := Flatten([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		expr    string
		crossed bool
		value   float64
	}{
		{"bubble>0.25", true, 0.3},
		{"bubble > 0.3", false, 0.3},
		{"bubble>=0.3", true, 0.3},
		{"balance<0.95", true, 0.9},
		{"balance<0.9", false, 0.9},
		{"step_ms>1200", false, 1000},
		{"stages.1.busy_ms!=7", false, 7},
		{"utilization.pipeline==0.6", true, 0.6},
	}
	for _, c := range cases {
		e, err := Parse(c.expr)
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		got, v, err := e.Eval(vals)
		if err != nil || got != c.crossed || v != c.value {
			t.Errorf("%s: crossed=%v value=%v err=%v; want %v %v", c.expr, got, v, err, c.crossed, c.value)
		}
	}
	for _, c := range []struct{ expr, want string }{
		{"bubbel>0.3", `unknown name "bubbel"`},
		{"mfu<0.4", "unknown for this trace"},
		{"step_ms>5%", "only makes sense in `ppprof diff`"},
	} {
		e, err := Parse(c.expr)
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		if _, _, err := e.Eval(vals); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.expr, err, c.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, s := range []string{"", "bubble", ">0.3", "bubble>x", "bubble>NaN", "bubble=>0.3"} {
		if _, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) accepted", s)
		}
	}
}

func TestEvalDiff(t *testing.T) {
	base, _ := Flatten([]byte(`{"step_ms":1000,"bubble":{"measured":0.2},"x":0}`))
	cur, _ := Flatten([]byte(`{"step_ms":1080,"bubble":{"measured":0.21},"x":0}`))
	cases := []struct {
		expr    string
		crossed bool
		change  float64
	}{
		{"step_ms>5%", true, 8},
		{"step_ms>10%", false, 8},
		{"step_ms>50", true, 80},
		{"bubble>0.02", false, 0.01},
		{"x>1%", false, 0},
	}
	for _, c := range cases {
		e, _ := Parse(c.expr)
		got, d, err := e.EvalDiff(base, cur)
		if err != nil || got != c.crossed || !close(d, c.change) {
			t.Errorf("%s: crossed=%v change=%v err=%v; want %v %v", c.expr, got, d, err, c.crossed, c.change)
		}
	}
}

func close(a, b float64) bool { d := a - b; return d < 1e-9 && d > -1e-9 }

package ingest

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/ppprof/ppprof/trace"
)

// Rule maps annotation names of a profiler trace (Kineto user annotations,
// or any event of a plain Chrome trace) to events of the model: a name that
// Pattern matches becomes an event of Kind. Named groups of Pattern give the
// event's labels: (?P<stage>...), (?P<mb>...) (or microbatch),
// (?P<chunk>...) and (?P<step>...), each a decimal integer. Rules are tried
// in order, before the built-in profiles (see BuiltinRules).
type Rule struct {
	Kind    trace.Kind
	Pattern *regexp.Regexp
	source  string // "user" or a built-in profile's name, for warnings
	// kindGroup, for built-in profiles: the named group holding the action
	// type (F, I, SEND_F...), mapped through actionKinds, instead of Kind.
	kindGroup string
}

// String returns the rule as --map takes it: KIND=REGEXP.
func (r Rule) String() string {
	if r.kindGroup != "" {
		return r.source + ":" + r.Pattern.String()
	}
	return r.Kind.String() + "=" + r.Pattern.String()
}

// ParseRule parses a --map rule "KIND=REGEXP", e.g.
// `F=^fwd_s(?P<stage>\d+)_mb(?P<mb>\d+)$`. KIND is a kind name (F, B, W,
// SEND_F, OPT, or a free-form name); REGEXP is Go regexp syntax whose named
// groups may be stage, mb (or microbatch), chunk and step.
func ParseRule(s string) (Rule, error) {
	name, expr, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(name) == "" || expr == "" {
		return Rule{}, fmt.Errorf("map rule %q: want KIND=REGEXP, e.g. 'F=^fwd(?P<mb>\\d+)$'", s)
	}
	k, err := trace.ParseKind(strings.TrimSpace(name))
	if err != nil {
		return Rule{}, fmt.Errorf("map rule %q: %w", s, err)
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return Rule{}, fmt.Errorf("map rule %q: %w", s, err)
	}
	for _, g := range re.SubexpNames() {
		switch g {
		case "", "stage", "mb", "microbatch", "chunk", "step":
		default:
			return Rule{}, fmt.Errorf("map rule %q: unknown named group %q (want stage, mb, chunk or step)", s, g)
		}
	}
	return Rule{Kind: k, Pattern: re, source: "user"}, nil
}

// actionKinds maps the computation types of torch.distributed.pipelining's
// actions to kinds. I (backward-input) is B: the model's B is
// backward-input when W is recorded separately.
var actionKinds = map[string]trace.Kind{
	"F": trace.F, "I": trace.B, "B": trace.B, "W": trace.W,
	"SEND_F": trace.SendF, "RECV_F": trace.RecvF, "SEND_B": trace.SendB, "RECV_B": trace.RecvB,
}

// BuiltinRules are the profiles tried after the user's rules:
//
//   - torch.distributed.pipelining: "PP:{stage}{action}{mb}" as its
//     schedule runtime labels each action (record_function), e.g. PP:0F3,
//     PP:1SEND_F2, PP:2I0; the stage is the stage index (the chunk on
//     interleaved schedules is derived from it per rank);
//   - older PiPPy / hand-written loops: "Forward 3", "Backward 3" (no
//     stage: the rank is taken as the stage, with a warning);
//   - PiPPy's pipe visualizer: "F_{stage},{mb}", "B_{stage},{mb}",
//     "W_{stage},{mb}".
var BuiltinRules = []Rule{
	{Pattern: regexp.MustCompile(`^PP:(?P<stage>\d+)(?P<action>F|I|B|W|SEND_F|RECV_F|SEND_B|RECV_B)(?P<mb>\d+)$`), source: "torch.distributed.pipelining", kindGroup: "action"},
	{Kind: trace.F, Pattern: regexp.MustCompile(`^[Ff]orward[ _](?P<mb>\d+)$`), source: "forward/backward i"},
	{Kind: trace.B, Pattern: regexp.MustCompile(`^[Bb]ackward[ _](?P<mb>\d+)$`), source: "forward/backward i"},
	{Pattern: regexp.MustCompile(`^(?P<action>[FBW])_(?P<stage>\d+),(?P<mb>\d+)$`), source: "pippy visualizer", kindGroup: "action"},
}

// match is what a rule made of one name.
type match struct {
	kind                      trace.Kind
	stage, mb, chunk, step    int64 // -1 when the rule has no such group
	hasStage, hasMB, hasChunk bool
	hasStep                   bool
	builtin                   bool
	source                    string
}

// mapper applies the user's rules, then the built-in profiles, to names,
// remembering each name's outcome (traces repeat few names many times).
type mapper struct {
	rules []Rule
	cache map[string]*match // nil value: no rule matched
}

func newMapper(user []Rule) *mapper {
	rules := append(append([]Rule(nil), user...), BuiltinRules...)
	return &mapper{rules: rules, cache: map[string]*match{}}
}

// lookup returns the match for name, or nil.
func (m *mapper) lookup(name string) *match {
	if r, ok := m.cache[name]; ok {
		return r
	}
	var out *match
	for _, r := range m.rules {
		sub := r.Pattern.FindStringSubmatch(name)
		if sub == nil {
			continue
		}
		mt := &match{kind: r.Kind, stage: -1, mb: -1, chunk: -1, step: -1, builtin: r.source != "user", source: r.source}
		ok := true
		for i, g := range r.Pattern.SubexpNames() {
			if g == "" || i >= len(sub) {
				continue
			}
			if g == r.kindGroup && g != "" {
				k, known := actionKinds[sub[i]]
				if !known {
					ok = false
				}
				mt.kind = k
				continue
			}
			v, err := strconv.ParseInt(sub[i], 10, 32)
			if err != nil || v < 0 {
				if sub[i] == "" {
					continue // an optional group that did not take part
				}
				ok = false
				continue
			}
			switch g {
			case "stage":
				mt.stage, mt.hasStage = v, true
			case "mb", "microbatch":
				mt.mb, mt.hasMB = v, true
			case "chunk":
				mt.chunk, mt.hasChunk = v, true
			case "step":
				mt.step, mt.hasStep = v, true
			}
		}
		if ok {
			out = mt
			break
		}
	}
	if len(m.cache) < 1<<16 {
		m.cache[name] = out
	}
	return out
}

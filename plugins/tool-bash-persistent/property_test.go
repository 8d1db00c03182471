package bashtool_test

// TestProperty runs random mixes of foreground output, background jobs,
// prompt changes, interrupted reads and plain calls in one persistent shell,
// and checks what the model saw over the whole scenario:
//
//   - every line a background job writes reaches the model exactly once, in
//     the order the job wrote it, and never before the call that started
//     the job;
//   - what a command prints itself appears exactly once, in order, in the
//     result of the call that ran it, and what an interrupt cut off never
//     appears;
//   - no prompt text, PS0 text, PROMPT_COMMAND output or plumbing appears:
//     every line of every result is made only of the scenario's tokens, or is
//     one of the texts the tool or bash is documented to add (the background
//     header, a job's "[N] PID", a job notice, the exit code line, the
//     interactive-input notice; and in an interrupted call one blank line,
//     the newline bash ends an interrupted read with, which the tool drops
//     only when it is last);
//   - a call that was not interrupted ends with "[exit code: N]" for a
//     non-zero status and has no such line for 0; an interrupted call ends
//     with the interactive-input notice.
//
// Which steps run is deterministic: seed s always gives the same steps.
// When background output lands is not, and is the point: the property holds
// whatever the timing. The default runs seeds 1 to 4, 40 random steps each;
// DSH_PROPERTY_ROUNDS=N runs seeds 1 to N. A failure prints the seed, the
// command that replays it, and every step with its result.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	propertyRounds = 4  // scenarios (seeds) by default
	propertySteps  = 40 // random steps per scenario, before the collection
)

// noise is in every prompt string and prompt hook output the scenarios set,
// so one search finds any of them leaking.
const noise = "NOISE"

// propertyToken matches what the scenarios print: fg-N for a command's own
// output, bg-N for a background job's lines, bg-N-head and bg-N-tail for the
// two halves of a line a job writes in two pieces. Commands print bg tokens
// through printf's %d, so the job notices bash prints, which quote the
// job's text, never contain one.
var propertyToken = regexp.MustCompile(`[bf]g-\d+(?:-head|-tail)?`)

var (
	jobStartLine  = regexp.MustCompile(`^\[\d+\] \d+$`)
	jobNoticeLine = regexp.MustCompile(`^\[\d+\][-+ ] +(?:Done|Exit \d+|Terminated|Killed|Interrupt)\b`)
	exitCodeLine  = regexp.MustCompile(`^\[exit code: -?\d+\]$`)
)

const strayHeader = "[output from background jobs since the previous call]"

// propStep is one call of a scenario and what it must produce.
type propStep struct {
	kind    string // fg, bg, prompt, interrupt, true, wait: for the report
	command string
	// fg: tokens the command prints itself, in order, all in its own result.
	fg []string
	// never: tokens the command would print after the point an interrupt
	// stops it.
	never []string
	// jobs: for each background job the command starts, its tokens in the
	// order it writes them.
	jobs [][]string
	// status is the exit status of a step that is not an interrupt.
	status int
}

func TestProperty(t *testing.T) {
	rounds := propertyRounds
	if v := os.Getenv("DSH_PROPERTY_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("DSH_PROPERTY_ROUNDS=%q: want a positive integer", v)
		}
		rounds = n
	}
	// One host for all scenarios, as a deployment runs many owners; the
	// parent's cleanup closes it after the parallel scenarios are done.
	hs := newHarness(t, "{timeoutMs: 30000}", "")
	for seed := uint64(1); seed <= uint64(rounds); seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			// Scenarios in parallel also load the machine, which moves
			// background output around the calls' boundaries.
			t.Parallel()
			runScenario(t, hs, seed)
		})
	}
}

// runScenario generates the steps of seed, runs them in a fresh shell, and
// checks the results.
func runScenario(t *testing.T, hs *harness, seed uint64) {
	t.Helper()
	steps := generateScenario(seed, propertySteps)
	o := hs.owner(t, fmt.Sprintf("property-%d", seed))
	t.Cleanup(func() {
		if err := o.Close(context.Background()); err != nil {
			t.Errorf("owner close: %v", err)
		}
	})
	results := make([]string, 0, len(steps))
	for i, s := range steps {
		// The call returning is the only event waited on; the timeout
		// only turns a hang into a failure with the report.
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		res := hs.call(ctx, o, s.command)
		cancel()
		if res.IsError {
			t.Fatalf("step %d: error result %q\n%s", i, res.Text, scenarioReport(seed, steps, results))
		}
		results = append(results, res.Text)
	}
	if problems := checkScenario(steps, results); len(problems) > 0 {
		t.Fatalf("%d problems:\n  %s\n%s", len(problems), strings.Join(problems, "\n  "), scenarioReport(seed, steps, results))
	}
}

// scenarioReport lists the seed, how to replay it, and each step with its result.
func scenarioReport(seed uint64, steps []propStep, results []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d; replay: DSH_PROPERTY_ROUNDS=%d go test -count=1 -run 'TestProperty/seed=%d$' ./plugins/tool-bash-persistent/\n", seed, seed, seed)
	for i, s := range steps {
		fmt.Fprintf(&b, "step %d [%s]: %s\n", i, s.kind, s.command)
		if i < len(results) {
			fmt.Fprintf(&b, "    => %q\n", results[i])
		} else {
			b.WriteString("    => (not run)\n")
		}
	}
	return b.String()
}

// generateScenario returns n random steps for seed, then the collection: a
// wait for every background job, and two plain calls for anything still on
// its way.
func generateScenario(seed uint64, n int) []propStep {
	g := &scenarioGen{r: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))}
	steps := make([]propStep, 0, n+3)
	for range n {
		switch k := g.r.IntN(20); {
		case k < 5:
			steps = append(steps, g.foreground())
		case k < 10:
			steps = append(steps, g.background())
		case k < 13:
			steps = append(steps, g.prompt())
		case k < 15:
			steps = append(steps, g.interrupt())
		default:
			steps = append(steps, propStep{kind: "true", command: "true"})
		}
	}
	return append(steps,
		propStep{kind: "wait", command: "wait"},
		propStep{kind: "true", command: "true"},
		propStep{kind: "true", command: "true"})
}

// scenarioGen makes the random steps; every token it hands out is unique
// in its scenario.
type scenarioGen struct {
	r    *rand.Rand
	last int
}

func (g *scenarioGen) next() int {
	g.last++
	return g.last
}

func (g *scenarioGen) fgToken() string { return "fg-" + strconv.Itoa(g.next()) }

func (g *scenarioGen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }

// sleep is a pause inside a command, so that background jobs land before,
// during and after calls and across several of them. It is part of the
// scenario, not synchronization.
func (g *scenarioGen) sleep() string {
	return "sleep " + g.pick("0.001", "0.005", "0.01", "0.02", "0.05", "0.1", "0.2")
}

// foreground prints fg tokens in one of several ways, sometimes with a
// non-zero status after them.
func (g *scenarioGen) foreground() propStep {
	s := propStep{kind: "fg"}
	var parts []string
	switch g.r.IntN(7) {
	case 0:
		a := g.fgToken()
		parts, s.fg = []string{"echo " + a}, []string{a}
	case 1: // several lines in one write
		for range 2 + g.r.IntN(3) {
			s.fg = append(s.fg, g.fgToken())
		}
		parts = []string{`printf '%s\n' ` + strings.Join(s.fg, " ")}
	case 2: // the last line without its newline
		a, b := g.fgToken(), g.fgToken()
		parts, s.fg = []string{"echo " + a, "printf " + b}, []string{a, b}
	case 3: // background output lands while the command runs
		a, b := g.fgToken(), g.fgToken()
		parts, s.fg = []string{"echo " + a, g.sleep(), "echo " + b}, []string{a, b}
	case 4:
		a := g.fgToken()
		parts, s.fg = []string{"echo " + a + " >&2"}, []string{a}
	case 5:
		a, b := g.fgToken(), g.fgToken()
		parts, s.fg = []string{`printf '%s\n' ` + a + " " + b + " | cat"}, []string{a, b}
	case 6: // a burst, long enough to span several reads of the terminal
		first := g.last + 1
		for range 50 + g.r.IntN(250) {
			s.fg = append(s.fg, g.fgToken())
		}
		parts = []string{fmt.Sprintf("for i in $(seq %d %d); do echo fg-$i; done", first, g.last)}
	}
	if g.r.IntN(3) == 0 {
		s.status = []int{1, 2, 3, 42, 255}[g.r.IntN(5)]
		parts = append(parts, fmt.Sprintf("(exit %d)", s.status))
	}
	s.command = strings.Join(parts, "; ")
	return s
}

// background starts one to three jobs that print their tokens later.
func (g *scenarioGen) background() propStep {
	s := propStep{kind: "bg"}
	var jobs []string
	for range 1 + g.r.IntN(3) {
		body, tokens := g.job()
		jobs = append(jobs, "("+body+") &")
		s.jobs = append(s.jobs, tokens)
	}
	s.command = strings.Join(jobs, " ")
	return s
}

// job is the body of one background job and the tokens it prints, in
// order.
func (g *scenarioGen) job() (string, []string) {
	var body []string
	if g.r.IntN(4) != 0 {
		body = append(body, g.sleep())
	}
	var tokens []string
	switch g.r.IntN(5) {
	case 0:
		n := g.next()
		body = append(body, fmt.Sprintf(`printf 'bg-%%d\n' %d`, n))
		tokens = []string{fmt.Sprintf("bg-%d", n)}
	case 1: // several lines in one write
		var ns []string
		for range 2 + g.r.IntN(3) {
			n := g.next()
			ns = append(ns, strconv.Itoa(n))
			tokens = append(tokens, fmt.Sprintf("bg-%d", n))
		}
		body = append(body, `printf 'bg-%d\n' `+strings.Join(ns, " "))
	case 2: // several lines with pauses between
		for range 2 + g.r.IntN(3) {
			n := g.next()
			body = append(body, fmt.Sprintf(`printf 'bg-%%d\n' %d`, n), g.sleep())
			tokens = append(tokens, fmt.Sprintf("bg-%d", n))
		}
	case 3: // one line in two writes, the newline only with the second
		n := g.next()
		body = append(body, fmt.Sprintf(`printf 'bg-%%d-head' %d`, n), g.sleep(), fmt.Sprintf(`printf 'bg-%%d-tail\n' %d`, n))
		tokens = []string{fmt.Sprintf("bg-%d-head", n), fmt.Sprintf("bg-%d-tail", n)}
	case 4:
		n := g.next()
		body = append(body, fmt.Sprintf(`printf 'bg-%%d\n' %d >&2`, n))
		tokens = []string{fmt.Sprintf("bg-%d", n)}
	}
	return strings.Join(body, "; "), tokens
}

// prompt changes a prompt variable or the prompt hook, sometimes with
// output of its own after it.
func (g *scenarioGen) prompt() propStep {
	changes := []string{
		`PS1='ps1-NOISE> '`,
		`PS1='\u@\h:\w NOISE\$ '`,
		`PS1='$(echo PS1-NOISE)> '`,
		`PS2='ps2-NOISE> '`,
		`PS0='ps0-NOISE\n'`,
		`PS0='$(echo PS0-NOISE)'`,
		`PROMPT_COMMAND='echo PC-NOISE'`,
		`PROMPT_COMMAND='echo PC-NOISE >&2; printf PC-NOISE'`,
		`PROMPT_COMMAND=('echo PC-NOISE-1' 'echo PC-NOISE-2')`,
		`PROMPT_COMMAND=`,
		`unset PROMPT_COMMAND`,
		`unset PS0 PS1 PS2`,
		// Hooks that keep the PROMPT_COMMAND they find, as direnv and
		// bashrc snippets write them: that is dsh's own hook.
		`PROMPT_COMMAND="echo PC-NOISE; $PROMPT_COMMAND"`,
		`PROMPT_COMMAND+=$'\n''echo PC-NOISE'`,
		`PROMPT_COMMAND+=('echo PC-NOISE')`,
	}
	s := propStep{kind: "prompt", command: g.pick(changes...)}
	if g.r.IntN(3) == 0 {
		a := g.fgToken()
		s.command += "; echo " + a
		s.fg = []string{a}
	}
	return s
}

// interrupt runs a command that waits for input from the terminal, which
// the tool interrupts.
func (g *scenarioGen) interrupt() propStep {
	s := propStep{kind: "interrupt"}
	switch g.r.IntN(5) {
	case 0:
		s.command = "read x"
	case 1:
		s.command = "cat"
	case 2:
		a, b := g.fgToken(), g.fgToken()
		s.command, s.fg, s.never = fmt.Sprintf("echo %s; read x; echo %s", a, b), []string{a}, []string{b}
	case 3:
		a, b := g.fgToken(), g.fgToken()
		s.command, s.fg, s.never = fmt.Sprintf("printf '%%s\\n' %s; cat; echo %s", a, b), []string{a}, []string{b}
	case 4:
		b := g.fgToken()
		s.command, s.never = "head -n 1; echo "+b, []string{b}
	}
	return s
}

// tokenAt is where a token appeared: which result, and where in it.
type tokenAt struct{ result, offset int }

func (a tokenAt) before(b tokenAt) bool {
	return a.result < b.result || a.result == b.result && a.offset < b.offset
}

// checkScenario returns what is wrong with the results of steps.
func checkScenario(steps []propStep, results []string) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	seen := map[string][]tokenAt{}
	for i, text := range results {
		for _, m := range propertyToken.FindAllStringIndex(text, -1) {
			tok := text[m[0]:m[1]]
			seen[tok] = append(seen[tok], tokenAt{i, m[0]})
		}
		checkLines(steps[i], text, func(format string, args ...any) { bad("step %d: "+format, append([]any{i}, args...)...) })
	}

	expected := map[string]bool{}
	for i, s := range steps {
		// A command's own output: once, in its own result, in order.
		var prev tokenAt
		for j, tok := range s.fg {
			expected[tok] = true
			at := seen[tok]
			switch {
			case len(at) != 1:
				bad("step %d: %s appeared %d times, want once", i, tok, len(at))
			case at[0].result != i:
				bad("step %d: %s appeared in the result of step %d", i, tok, at[0].result)
			case j > 0 && !prev.before(at[0]):
				bad("step %d: %s appeared before %s", i, tok, s.fg[j-1])
			}
			if len(at) > 0 {
				prev = at[0]
			}
		}
		for _, tok := range s.never {
			expected[tok] = true
			if n := len(seen[tok]); n != 0 {
				bad("step %d: %s, after the interrupted read, appeared %d times", i, tok, n)
			}
		}
		// A background job's output: once over the scenario, not before the
		// job started, in the order the job wrote it.
		for _, job := range s.jobs {
			var prev tokenAt
			for j, tok := range job {
				expected[tok] = true
				at := seen[tok]
				switch {
				case len(at) != 1:
					bad("step %d: background %s reached the model %d times, want once", i, tok, len(at))
				case at[0].result < i:
					bad("step %d: background %s appeared in step %d, before its job started", i, tok, at[0].result)
				case j > 0 && !prev.before(at[0]):
					bad("step %d: background %s appeared before %s", i, tok, job[j-1])
				}
				if len(at) > 0 {
					prev = at[0]
				}
			}
		}
	}
	var unknown []string
	for tok := range seen {
		if !expected[tok] {
			unknown = append(unknown, tok)
		}
	}
	slices.Sort(unknown)
	for _, tok := range unknown {
		bad("%s appeared, and no step prints it", tok)
	}
	return problems
}

// checkLines checks one result line by line: each is made only of tokens,
// or is a text the tool or bash is documented to add, in its place.
func checkLines(s propStep, text string, bad func(string, ...any)) {
	for _, leak := range []string{noise, "__dsh_", "\x1b", "\x00"} {
		if strings.Contains(text, leak) {
			bad("the result contains %q", leak)
		}
	}
	lines := strings.Split(text, "\n")
	last := len(lines) - 1
	interrupted := s.kind == "interrupt"
	blank := 0
	for j, line := range lines {
		switch {
		case line == strayHeader:
			if j != 0 {
				bad("line %d: the background header is not the first line", j)
			}
		case line == interactiveNotice:
			if !interrupted || j != last {
				bad("line %d: an interactive-input notice where none belongs", j)
			}
		case exitCodeLine.MatchString(line):
			if interrupted || j != last || line != fmt.Sprintf("[exit code: %d]", s.status) {
				bad("line %d: %q, want the status %d on the last line", j, line, s.status)
			}
		case line == "" && text == "":
			// An empty result.
		case line == "" && interrupted:
			// Bash ends the line of a read it interrupts; the tool drops
			// that newline when it is last, but background output that
			// lands after it leaves it as one blank line.
			if blank++; blank > 1 {
				bad("line %d: more than one blank line", j)
			}
		default:
			// What bash prints for a job, possibly after the first half of
			// a job's line that was still unfinished.
			rest := propertyToken.ReplaceAllString(line, "")
			if rest == "" && line != "" || jobStartLine.MatchString(rest) || jobNoticeLine.MatchString(rest) {
				continue
			}
			bad("line %d: unexplained text %q", j, line)
		}
	}
	switch {
	case interrupted && lines[last] != interactiveNotice:
		bad("an interrupted call ends with %q, not the interactive-input notice", lines[last])
	case !interrupted && s.status != 0 && lines[last] != fmt.Sprintf("[exit code: %d]", s.status):
		bad("the last line is %q, want [exit code: %d]", lines[last], s.status)
	}
}

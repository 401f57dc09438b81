package generate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acaptcha/acaptcha/internal/testutil"
	"github.com/acaptcha/acaptcha/skill"
	"github.com/acaptcha/acaptcha/skill/attack"
	"github.com/acaptcha/acaptcha/skill/generate"
	"github.com/acaptcha/acaptcha/skill/pool"
	"github.com/acaptcha/acaptcha/skill/procedural"
)

// The hybrid generator's tests drive it through the real langchaingo
// OpenAI client against a stub server whose brain rewords (well or
// badly) and answers the cross-check solver's questions.

// skeletonSeed makes the skeleton stream deterministic: the tests know in
// advance which procedural sets the hybrid generator will draw.
const skeletonSeed = 20260501

// skeletonCount is how many skeletons of the stream the tests precompute;
// no test draws more.
const skeletonCount = 200

// skeletons returns a fresh deterministic skeleton source and the sets it
// will hand out, in order. The sets are computed once per test binary and
// shared (read-only) by every test: the stream is deterministic, and
// regenerating it per subtest was a large part of the hybrid tests' time
// under -race.
func skeletons(t testing.TB) (skill.Source, []*skill.Set) {
	t.Helper()
	seed := uint64(skeletonSeed)
	src, err := procedural.New(procedural.Config{Seed: &seed})
	if err != nil {
		t.Fatal(err)
	}
	sets, err := skeletonStream()
	if err != nil {
		t.Fatal(err)
	}
	return src, sets
}

// skeletonStream returns the first skeletonCount sets of the
// deterministic stream, generated once; the tests must not modify them.
var skeletonStream = sync.OnceValues(func() ([]*skill.Set, error) {
	seed := uint64(skeletonSeed)
	ref, err := procedural.New(procedural.Config{Seed: &seed})
	if err != nil {
		return nil, err
	}
	var sets []*skill.Set
	for range skeletonCount {
		s, err := ref.Next(context.Background())
		if err != nil {
			return nil, err
		}
		sets = append(sets, s)
	}
	return sets, nil
})

// skeletonCodes maps each narrative of the skeleton stream to its codes
// (codesOf), computed once: every question oracle needs them, and the
// backtracking regular expression over 600 narratives per oracle
// dominated the hybrid tests' setup under -race.
var skeletonCodes = sync.OnceValue(func() map[string]map[string]bool {
	sets, err := skeletonStream()
	if err != nil {
		return nil // skeletons reports the error
	}
	m := map[string]map[string]bool{}
	for _, s := range sets {
		for _, p := range s.Parts {
			m[p.Narrative] = codesOf(p.Narrative)
		}
	}
	return m
})

// narrativeCodes is codesOf(narrative), from skeletonCodes when the
// narrative is a skeleton's. The map is shared: callers must not modify
// it.
func narrativeCodes(narrative string) map[string]bool {
	if c, ok := skeletonCodes()[narrative]; ok {
		return c
	}
	return codesOf(narrative)
}

// rewordRequest extracts the narrative and the part number from a
// rewording request; ok is false for other requests (the solver's).
func rewordRequest(req testutil.BrainRequest) (text string, part int, ok bool) {
	msg, found := req.LastUser()
	if !found {
		return "", 0, false
	}
	i := strings.Index(msg, generate.RewordTextStart+"\n")
	j := strings.LastIndex(msg, "\n"+generate.RewordTextEnd)
	if i < 0 || j < i {
		return "", 0, false
	}
	m := regexp.MustCompile(`part (\d) of 3`).FindStringSubmatch(msg)
	if m == nil {
		return "", 0, false
	}
	return msg[i+len(generate.RewordTextStart)+1 : j], int(m[1][0] - '0'), true
}

// rewordReply wraps a narrative as the rewording reply.
func rewordReply(narrative string) testutil.BrainReply {
	b, _ := json.Marshal(map[string]string{"narrative": narrative})
	return testutil.BrainReply{Text: string(b)}
}

// sentences splits a line after ". ", "! " or "? " followed by a capital.
func sentences(line string) []string {
	var out []string
	start := 0
	for i := 0; i+2 < len(line); i++ {
		if strings.IndexByte(".!?", line[i]) >= 0 && line[i+1] == ' ' && line[i+2] >= 'A' && line[i+2] <= 'Z' {
			out = append(out, line[start:i+1])
			start = i + 2
		}
	}
	return append(out, line[start:])
}

// fillerSynonyms rewords the procedural generator's connective phrases;
// none of them carries a fact.
var fillerSynonyms = strings.NewReplacer(
	"registered a reading of", "showed a reading of",
	"came in at", "was measured at",
	"was discussed briefly at", "came up briefly at",
	"The paperwork shows", "The records show",
	"took over the paperwork for", "assumed the paperwork for",
	"midway through the period", "partway through the period",
	"list nothing out of the ordinary", "record nothing unusual",
	"As the assignment sheet shows,", "According to the assignment sheet,",
	"Someone on the team suggested early on that", "A team member suggested early on that",
	"was processed with the rest of the set on", "went through processing with the rest of the set on",
	"within specification", "inside specification",
	"came through its control checks", "passed its control checks",
	"The next coordination call is scheduled for", "The following coordination call is set for",
	"ran to", "came to",
)

// faithful rewords the way a careful editor would: in every line of
// prose the first sentence moves to the end, and connective phrases are
// swapped for synonyms. Headers stay, and so does every fact.
func faithful(text string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		s := sentences(l)
		if len(s) >= 2 {
			s = append(s[1:], s[0])
		}
		lines[i] = fillerSynonyms.Replace(strings.Join(s, " "))
	}
	return strings.Join(lines, "\n")
}

// questionOracle answers the cross-check solver: it finds a known
// question in the prompt and gives its canonical answer, picking among
// skeletons that share the question's wording by the codes the prompt's
// narrative names. It does not read the narrative otherwise, so it plays
// a reader for whom the facts survived.
type questionOracle struct{ answers map[string][]oracleAnswer }

type oracleAnswer struct {
	answer string
	codes  map[string]bool // codes of the question's part
}

// codeLike matches codes with digits ("RG-477", "CVE-2023-3615").
var codeLike = regexp.MustCompile(`[A-Za-z0-9]*\d[A-Za-z0-9]*(?:[-:/*][A-Za-z0-9]+)+|[A-Za-z]+(?:[-:/*][A-Za-z0-9]+)*\d+`)

func codesOf(text string) map[string]bool {
	m := map[string]bool{}
	for _, c := range codeLike.FindAllString(text, -1) {
		m[c] = true
	}
	return m
}

// newQuestionOracle knows every question of sets in its skeleton wording
// and in each wording that rewordings give it.
func newQuestionOracle(sets []*skill.Set, rewordings ...func(string) string) *questionOracle {
	o := &questionOracle{answers: map[string][]oracleAnswer{}}
	for _, s := range sets {
		for _, p := range s.Parts {
			codes := narrativeCodes(p.Narrative)
			for _, q := range p.Questions {
				k := strings.Join(strings.Fields(q.Question), " ")
				o.answers[k] = append(o.answers[k], oracleAnswer{answer: q.Answer, codes: codes})
				for _, rw := range rewordings {
					if r := strings.Join(strings.Fields(rw(q.Question)), " "); r != k {
						o.answers[r] = append(o.answers[r], oracleAnswer{answer: q.Answer, codes: codes})
					}
				}
			}
		}
	}
	return o
}

// questionsRequest extracts the questions of a question-rewording
// request, by id ("2.1"), in order; ok is false for other requests.
func questionsRequest(req testutil.BrainRequest) (ids, questions []string, ok bool) {
	msg, found := req.LastUser()
	if !found {
		return nil, nil, false
	}
	i := strings.Index(msg, generate.RewordQuestionsStart+"\n")
	j := strings.LastIndex(msg, "\n"+generate.RewordQuestionsEnd)
	if i < 0 || j < i {
		return nil, nil, false
	}
	line := regexp.MustCompile(`^\[(\d\.\d)\] (.*)$`)
	for _, l := range strings.Split(msg[i+len(generate.RewordQuestionsStart)+1:j], "\n") {
		if m := line.FindStringSubmatch(l); m != nil {
			ids, questions = append(ids, m[1]), append(questions, m[2])
		}
	}
	return ids, questions, len(ids) > 0
}

// questionSynonyms reword the procedural generator's question phrasing
// without touching a term the question refers to.
var questionSynonyms = strings.NewReplacer(
	"What ", "Which ",
	"was recorded", "was logged",
	"Among the ", "Of the ",
	"How many days passed", "How many days elapsed",
	"Under the ", "Applying the ",
	"applies to", "holds for",
)

// stubRewordQuestion rewords a question as a careful model would, keeping
// its meaning and every term: synonyms for its phrasing, or a lead-in
// when none applies.
func stubRewordQuestion(q string) string {
	r := questionSynonyms.Replace(q)
	if r != q {
		return r
	}
	first, rest, _ := strings.Cut(q, " ")
	if len(first) > 1 && first[0] >= 'A' && first[0] <= 'Z' && strings.ToLower(first[1:]) == first[1:] {
		first = strings.ToLower(first[:1]) + first[1:]
	}
	return "Going by the records, " + first + " " + rest
}

// questionsReply answers a question-rewording request with rw applied to
// every question.
func questionsReply(ids, questions []string, rw func(string) string) testutil.BrainReply {
	type entry struct {
		ID       string `json:"id"`
		Question string `json:"question"`
	}
	var out struct {
		Questions []entry `json:"questions"`
	}
	for k := range ids {
		out.Questions = append(out.Questions, entry{ids[k], rw(questions[k])})
	}
	b, _ := json.Marshal(out)
	return testutil.BrainReply{Text: string(b)}
}

func (o *questionOracle) Reply(req testutil.BrainRequest) testutil.BrainReply {
	msg, _ := req.LastUser()
	i := strings.LastIndex(msg, "Question: ")
	if i < 0 {
		return testutil.BrainReply{Text: testutil.Unknown}
	}
	q := msg[i+len("Question: "):]
	if j := strings.Index(q, "\n"); j >= 0 {
		q = q[:j]
	}
	codes := codesOf(msg[:i])
	best, score := testutil.Unknown, 0
	for _, a := range o.answers[strings.TrimSpace(q)] {
		n := 0
		for c := range a.codes {
			if codes[c] {
				n++
			}
		}
		if n > score {
			best, score = a.answer, n
		}
	}
	return testutil.BrainReply{Text: best}
}

// rewording routes narrative rewording requests to reword (part is
// 1-based), question rewording requests to stubRewordQuestion, and
// everything else to the question oracle.
func rewording(sets []*skill.Set, reword func(text string, part int) testutil.BrainReply) testutil.Brain {
	return rewordingQ(sets, reword, stubRewordQuestion)
}

// rewordingQ is rewording with rq rewording each question; the oracle
// knows the questions in rq's wording too.
func rewordingQ(sets []*skill.Set, reword func(text string, part int) testutil.BrainReply, rq func(string) string) testutil.Brain {
	solve := newQuestionOracle(sets, rq)
	return testutil.BrainFunc(func(req testutil.BrainRequest) testutil.BrainReply {
		if text, part, ok := rewordRequest(req); ok {
			return reword(text, part)
		}
		if ids, qs, ok := questionsRequest(req); ok {
			return questionsReply(ids, qs, rq)
		}
		return solve.Reply(req)
	})
}

// newHybrid builds a hybrid generator over an OpenAI stub with brain b
// and the deterministic skeleton stream.
func newHybrid(t *testing.T, b func(sets []*skill.Set) testutil.Brain, edit ...func(*generate.HybridConfig)) (*generate.Hybrid, []*skill.Set, *testutil.StubServer) {
	t.Helper()
	src, sets := skeletons(t)
	m, srv := testutil.NewModelFor(t, "openai", b(sets))
	pol := skill.DefaultPolicy()
	cfg := generate.HybridConfig{
		Config: generate.Config{
			Model:            m,
			CallTimeout:      testCallTimeout,
			CheckTimeout:     5 * time.Second,
			RateLimitBackoff: 5 * time.Millisecond,
			Policy:           &pol,
			Logger:           quiet,
			// The stub's rewording only reorders sentences and swaps
			// connectives, so the procedural inverter still parses it:
			// these tests check the rewording, TestHybridWhiteBoxFilter
			// the white-box stage.
			WhiteBox: generate.WhiteBoxOff,
		},
		Skeletons: src,
	}
	for _, e := range edit {
		e(&cfg)
	}
	h, err := generate.NewHybrid(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h, sets, srv
}

// skeletonOf finds the skeleton an accepted set was made from: the one
// whose questions include all of the set's.
func skeletonOf(t *testing.T, s *skill.Set, sets []*skill.Set) *skill.Set {
	t.Helper()
	for _, k := range sets {
		if k.Domain != s.Domain {
			continue
		}
		match := true
		for pi := range s.Parts {
			for _, q := range s.Parts[pi].Questions {
				if !slices.ContainsFunc(k.Parts[pi].Questions, func(kq skill.Question) bool { return sameQuestion(kq.Question, q.Question) }) {
					match = false
				}
			}
		}
		if match {
			return k
		}
	}
	t.Fatalf("set %s matches no skeleton", s.ID)
	return nil
}

// assertGroundTruth checks that s keeps its skeleton's questions and
// answers unchanged while every narrative is new.
func assertGroundTruth(t *testing.T, s *skill.Set, sets []*skill.Set) {
	t.Helper()
	k := skeletonOf(t, s, sets)
	for pi := range s.Parts {
		if s.Parts[pi].Narrative == k.Parts[pi].Narrative {
			t.Errorf("part %d was not reworded", pi+1)
		}
		for _, q := range s.Parts[pi].Questions {
			i := slices.IndexFunc(k.Parts[pi].Questions, func(kq skill.Question) bool { return sameQuestion(kq.Question, q.Question) })
			kq := k.Parts[pi].Questions[i]
			if q.Answer != kq.Answer || !slices.Equal(q.Answers, kq.Answers) || q.ReasoningType != kq.ReasoningType ||
				q.AnswerType != kq.AnswerType || !slices.Equal(q.DependsOn, kq.DependsOn) || !slices.Equal(q.Distractors, kq.Distractors) {
				t.Errorf("part %d question %q changed: %+v, skeleton %+v", pi+1, q.Question, q, kq)
			}
			if pv := s.Provenance; pv != nil && pv.LLMQuestions && q.Question == kq.Question {
				t.Errorf("part %d question %q not reworded in a set whose provenance says it was", pi+1, q.Question)
			}
		}
	}
	if s.ID != s.ContentID() {
		t.Errorf("id %s, content id %s", s.ID, s.ContentID())
	}
}

// sameQuestion reports whether got is the skeleton question want, in its
// own wording or the stub brain's rewording.
func sameQuestion(want, got string) bool {
	return want == got || stubRewordQuestion(want) == got
}

func faithfulBrain(sets []*skill.Set) testutil.Brain {
	return rewording(sets, func(text string, _ int) testutil.BrainReply { return rewordReply(faithful(text)) })
}

// firstAccepted runs attempts until one is accepted (at most n).
func firstAccepted(t *testing.T, h *generate.Hybrid, n int) *generate.Outcome {
	t.Helper()
	for range n {
		o, err := h.Generate(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if o.Reason == "" {
			return o
		}
		t.Logf("rejected: %s: %s", o.Reason, o.Detail)
	}
	t.Fatalf("no set accepted in %d attempts: %+v", n, h.Stats())
	return nil
}

func TestHybridFaithfulRewordingAccepted(t *testing.T) {
	h, sets, srv := newHybrid(t, faithfulBrain)
	o := firstAccepted(t, h, 10)
	assertGroundTruth(t, o.Set, sets)
	if o.GenerationCalls != skill.Parts+1 {
		t.Errorf("%d rewording calls, want one per part and one for the questions", o.GenerationCalls)
	}
	if o.QuestionsReworded == 0 || o.QuestionsKept != nil {
		t.Errorf("questions reworded %d, kept %v", o.QuestionsReworded, o.QuestionsKept)
	}
	want := skill.Provenance{Source: skill.SourceHybrid, Model: "openai:" + testutil.StubModelName, LLMQuestions: true}
	if pv := o.Set.Provenance; pv == nil || *pv != want {
		t.Errorf("provenance %+v, want %+v", pv, want)
	}
	if o.Generation.InputTokens == 0 || o.Generation.OutputTokens == 0 || o.Check.InputTokens == 0 || o.CheckCalls == 0 {
		t.Errorf("tokens not counted: generation %+v, check %+v (%d calls)", o.Generation, o.Check, o.CheckCalls)
	}
	// The requests: three rewording requests per attempt, with the
	// narrative fenced, the terms to keep listed, and JSON mode.
	var rewords []testutil.BrainRequest
	for _, r := range srv.Received() {
		if _, _, ok := rewordRequest(r); ok {
			rewords = append(rewords, r)
		}
	}
	if len(rewords) < skill.Parts {
		t.Fatalf("%d rewording requests", len(rewords))
	}
	last := rewords[len(rewords)-1]
	msg, _ := last.LastUser()
	if !strings.Contains(last.System, "JSON object") || !strings.Contains(msg, "Copy each of these exactly") {
		t.Errorf("rewording request lacks its instructions:\n%s\n%s", last.System, msg)
	}
	k := skeletonOf(t, o.Set, sets)
	for _, q := range k.Parts[2].Questions {
		if strings.Contains(msg, q.Question) {
			t.Errorf("rewording request shows a question: %q", q.Question)
		}
	}
	// The set can be served.
	if _, err := skill.NewSession(o.Set, skill.DefaultPolicy(), nil); err != nil {
		t.Errorf("accepted set cannot be served: %v", err)
	}
	st := h.Stats()
	if st.Accepted != 1 || st.GenerationCalls < skill.Parts || st.Generation.InputTokens < o.Generation.InputTokens {
		t.Errorf("stats %+v", st)
	}
}

// measurement matches a decimal with its unit.
var measurement = regexp.MustCompile(`\d+\.\d+(?: ?%| percent| µM| points| GB| standard deviations| log CFU/g)?`)

// dropNumber replaces the first measurement of text (not a piece of an
// address or a version) with words.
func dropNumber(text string) string {
	for _, m := range measurement.FindAllStringIndex(text, -1) {
		if m[0] > 0 && strings.ContainsAny(text[m[0]-1:m[0]], ".0123456789") || m[1] < len(text) && text[m[1]] == '.' && m[1]+1 < len(text) && text[m[1]+1] >= '0' && text[m[1]+1] <= '9' {
			continue
		}
		return text[:m[0]] + "an unrecorded amount" + text[m[1]:]
	}
	return text
}

// code finds a candidate's code ("RG-477", "KRX-656", "CVE-2023-3615").
var code = regexp.MustCompile(`\b[A-Z]{2,4}-\d{3,5}\b`)

func TestHybridUnfaithfulRewordingRejected(t *testing.T) {
	t.Parallel() // CPU-bound under -race: lets the package use both cores
	cases := []struct {
		name   string
		reword func(text string, part int) testutil.BrainReply
		want   generate.Reason
		detail string
	}{
		{"drops-a-number", func(text string, _ int) testutil.BrainReply {
			return rewordReply(faithful(dropNumber(text)))
		}, generate.RejectFactLost, "number"},
		{"renames-an-entity", func(text string, _ int) testutil.BrainReply {
			return rewordReply(faithful(strings.ReplaceAll(text, code.FindString(text), "QX-0000")))
		}, generate.RejectFactLost, "identifier"},
		{"twice-as-long", func(text string, _ int) testutil.BrainReply {
			lines := strings.Split(text, "\n")
			for i, l := range lines {
				if len(sentences(l)) > 1 {
					lines[i] = l + " " + l
				}
			}
			return rewordReply(strings.Join(lines, "\n") + " " + text)
		}, generate.RejectLengthDrift, "tokens"},
		{"merges-paragraphs", func(text string, _ int) testutil.BrainReply {
			return rewordReply(strings.ReplaceAll(faithful(text), "\n\n", "\n"))
		}, generate.RejectParagraphs, "paragraphs"},
		{"adds-a-number", func(text string, _ int) testutil.BrainReply {
			return rewordReply(faithful(text) + " A further 987.6 units were logged.")
		}, generate.RejectFactAdded, "987.6"},
		{"verdict-word", func(text string, _ int) testutil.BrainReply {
			return rewordReply(faithful(text) + " The finding was confirmed.")
		}, generate.RejectLeakage, "confirmed"},
		{"prose-around-json", func(text string, _ int) testutil.BrainReply {
			r := rewordReply(faithful(text))
			r.Text = "Here is the reworded section:\n" + r.Text
			return r
		}, generate.RejectMalformed, "does not start with a JSON object"},
		{"unknown-key", func(text string, _ int) testutil.BrainReply {
			b, _ := json.Marshal(map[string]string{"narrative": faithful(text), "notes": "kept every fact"})
			return testutil.BrainReply{Text: string(b)}
		}, generate.RejectMalformed, "unknown field"},
		{"empty", func(string, int) testutil.BrainReply { return testutil.BrainReply{} }, generate.RejectEmpty, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, _, _ := newHybrid(t, func(sets []*skill.Set) testutil.Brain { return rewording(sets, c.reword) })
			o, err := h.Generate(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if o.Reason != c.want || !strings.Contains(o.Detail, c.detail) {
				t.Fatalf("reason %q (%s), want %q with %q", o.Reason, o.Detail, c.want, c.detail)
			}
			if o.Set != nil {
				t.Error("rejected attempt has a set")
			}
			st := h.Stats()
			if st.Attempts != 1 || st.Rejected[c.want] != 1 || st.GenerationCalls == 0 {
				t.Errorf("stats %+v", st)
			}
			if c.want != generate.RejectEmpty && st.Generation.InputTokens == 0 {
				t.Errorf("tokens of the rejected attempt not counted: %+v", st.Generation)
			}
		})
	}
}

// counting wraps a text mutation for a rewording brain: it applies the
// mutation before the faithful rewording and counts the parts it changed.
type counting struct {
	mu      sync.Mutex
	applied int
	mutate  func(string) string
}

func (c *counting) reword(text string, _ int) testutil.BrainReply {
	m := c.mutate(text)
	if m != text {
		c.mu.Lock()
		c.applied++
		c.mu.Unlock()
	}
	return rewordReply(faithful(m))
}

func (c *counting) take() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.applied
	c.applied = 0
	return n
}

var (
	ratioRe      = regexp.MustCompile(`\b(\d) (out of|of) (the )?(\d)\b`)
	isoDateRe    = regexp.MustCompile(`\b(20\d\d)-(\d\d)-(\d\d)\b`)
	percentRe    = regexp.MustCompile(`(\d)%`)
	functionWord = regexp.MustCompile(`\b(?:for|of|from|to|in|on|at|by|with)\b`)
	aliasRe      = regexp.MustCompile(`\bthe ([a-z][a-z-]* [a-z]+) ([A-Z][A-Za-z]*-?\d+[A-Za-z0-9-]*)\b`)
)

var digitWords = []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"}

var monthNames = []string{"January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"}

// The fact check tells faithful changes of form from changes of fact.
func TestHybridFactCheck(t *testing.T) {
	t.Parallel() // CPU-bound under -race: lets the package use both cores
	cases := []struct {
		name   string
		mutate func(string) string
		want   generate.Reason // "" when the change is faithful
	}{
		{"percent-spelled-out", func(s string) string { return percentRe.ReplaceAllString(s, "$1 percent") }, ""},
		{"counts-in-words", func(s string) string {
			return ratioRe.ReplaceAllStringFunc(s, func(m string) string {
				p := ratioRe.FindStringSubmatch(m)
				return digitWords[p[1][0]-'0'] + " " + p[2] + " " + p[3] + digitWords[p[4][0]-'0']
			})
		}, ""},
		{"n-of-n-as-all", func(s string) string {
			return ratioRe.ReplaceAllStringFunc(s, func(m string) string {
				if p := ratioRe.FindStringSubmatch(m); p[1] == p[4] && p[2] == "of" {
					return "all " + p[4]
				}
				return m
			})
		}, ""},
		{"iso-dates-spelled-out", func(s string) string {
			return isoDateRe.ReplaceAllStringFunc(s, func(m string) string {
				p := isoDateRe.FindStringSubmatch(m)
				mo := int(p[2][0]-'0')*10 + int(p[2][1]-'0')
				return strings.TrimLeft(p[3], "0") + " " + monthNames[mo-1] + " " + p[1]
			})
		}, ""},
		{"ratio-changed", func(s string) string {
			m := ratioRe.FindStringSubmatchIndex(s)
			if m == nil {
				return s
			}
			return s[:m[8]] + string(rune(s[m[8]]+1)) + s[m[9]:]
		}, generate.RejectFactLost},
		{"measurement-changed", func(s string) string {
			m := measurement.FindStringIndex(s)
			if m == nil {
				return s
			}
			return s[:m[0]] + "9" + s[m[0]:]
		}, generate.RejectFactLost},
		{"alias-resolved-to-code", func(s string) string {
			// A description resolved to the code it introduces, at
			// every mention.
			for _, m := range aliasRe.FindAllStringSubmatchIndex(s, -1) {
				if desc, code := s[m[2]:m[3]], s[m[4]:m[5]]; !functionWord.MatchString(desc) {
					s = strings.ReplaceAll(s, s[m[0]:m[1]], code)
					return strings.NewReplacer("the "+desc, code, "The "+desc, code).Replace(s)
				}
			}
			return s
		}, generate.RejectFactLost},
		{"date-moved", func(s string) string {
			m := isoDateRe.FindStringSubmatchIndex(s)
			if m == nil {
				return s
			}
			return s[:m[2]] + "2031" + s[m[3]:]
		}, generate.RejectFactLost},
		{"date-added", func(s string) string {
			i := strings.Index(s, ". ")
			if i < 0 {
				return s
			}
			return s[:i] + " on 30 December 2031" + s[i:]
		}, generate.RejectFactAdded},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mut := &counting{mutate: c.mutate}
			h, sets, _ := newHybrid(t, func(sets []*skill.Set) testutil.Brain { return rewording(sets, mut.reword) })
			checked, accepted := 0, 0
			for range 6 {
				o, err := h.Generate(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if mut.take() == 0 {
					continue
				}
				checked++
				if c.want == "" {
					if slices.Contains(generate.HybridReasons, o.Reason) {
						t.Errorf("faithful change rejected: %s: %s", o.Reason, o.Detail)
					}
					if o.Set != nil {
						accepted++
						assertGroundTruth(t, o.Set, sets)
					}
				} else if o.Reason != c.want {
					t.Errorf("reason %q (%s), want %q", o.Reason, o.Detail, c.want)
				}
				if checked == 2 {
					break
				}
			}
			if checked == 0 {
				t.Fatal("the mutation never applied")
			}
			if c.want == "" && accepted == 0 {
				t.Error("no set with the faithful change was accepted")
			}
		})
	}
}

// An earlier part's answer that the skeleton never named in a later part
// is a leak, even without any back-reference.
func TestHybridEarlierAnswerNamedRejected(t *testing.T) {
	h, _, _ := newHybrid(t, func(sets []*skill.Set) testutil.Brain {
		return rewording(sets, func(text string, part int) testutil.BrainReply {
			if part != 2 {
				return rewordReply(faithful(text))
			}
			for _, s := range sets {
				for _, p := range s.Parts[1:2] {
					if p.Narrative == text {
						ans := s.Parts[0].Questions[0].Answer
						for _, q := range s.Parts[0].Questions {
							if q.AnswerType == skill.EntityAnswer {
								ans = q.Answer
							}
						}
						return rewordReply(faithful(text) + " The panel also covered " + ans + ".")
					}
				}
			}
			return rewordReply(faithful(text))
		})
	})
	o, err := h.Generate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if o.Reason != generate.RejectLeakage || !strings.Contains(o.Detail, "part 2 names part 1's answer") {
		t.Fatalf("reason %q: %s", o.Reason, o.Detail)
	}
}

func TestHybridProviderErrors(t *testing.T) {
	t.Parallel() // CPU-bound under -race: lets the package use both cores
	t.Run("429-then-success", func(t *testing.T) {
		var once sync.Once
		h, sets, _ := newHybrid(t, func(sets []*skill.Set) testutil.Brain {
			return rewording(sets, func(text string, _ int) testutil.BrainReply {
				limited := false
				once.Do(func() { limited = true })
				if limited {
					return testutil.BrainReply{Status: http.StatusTooManyRequests}
				}
				return rewordReply(faithful(text))
			})
		})
		o := firstAccepted(t, h, 10)
		assertGroundTruth(t, o.Set, sets)
		if st := h.Stats(); st.GenerationCalls%(skill.Parts+1) != 1 {
			t.Errorf("%d calls in %d attempts: the 429 was not retried once", st.GenerationCalls, st.Attempts)
		}
	})
	t.Run("server-error-ends-produce", func(t *testing.T) {
		h, _, _ := newHybrid(t, func(sets []*skill.Set) testutil.Brain {
			return rewording(sets, func(string, int) testutil.BrainReply {
				return testutil.BrainReply{Status: http.StatusInternalServerError}
			})
		})
		_, err := h.Produce(context.Background())
		var re *generate.RejectError
		if !errors.As(err, &re) || re.Reason != generate.RejectLLMError {
			t.Fatalf("error %v", err)
		}
		if st := h.Stats(); st.Attempts != 1 {
			t.Errorf("%d attempts after a provider failure, want 1", st.Attempts)
		}
	})
}

// Produce retries content rejections with new skeletons, bounded.
func TestHybridProduceBounded(t *testing.T) {
	h, _, _ := newHybrid(t, func(sets []*skill.Set) testutil.Brain {
		return rewording(sets, func(text string, _ int) testutil.BrainReply {
			return rewordReply(strings.ReplaceAll(text, code.FindString(text), "QX-0000"))
		})
	}, func(c *generate.HybridConfig) { c.Attempts = 4 })
	_, err := h.Produce(context.Background())
	var re *generate.RejectError
	if !errors.As(err, &re) || re.Reason != generate.RejectFactLost {
		t.Fatalf("error %v", err)
	}
	if st := h.Stats(); st.Attempts != 4 || st.Rejected[generate.RejectFactLost] != 4 {
		t.Errorf("stats %+v", st)
	}
}

func TestHybridPool(t *testing.T) {
	t.Parallel() // CPU-bound under -race: lets the package use both cores
	h, sets, _ := newHybrid(t, faithfulBrain)
	p, err := pool.New(pool.Config{Size: 2, Wait: time.Minute, RetryBackoff: time.Millisecond, Logger: quiet}, h)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := p.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	assertGroundTruth(t, s, sets)
	st := p.Stats()
	if gs, ok := st.Generator.(*generate.Stats); !ok || gs.Accepted == 0 || gs.Generation.InputTokens == 0 {
		t.Errorf("pool stats %+v", st)
	}
}

func TestNewHybridConfig(t *testing.T) {
	m, _ := testutil.NewModelFor(t, "openai", testutil.Text("{}"))
	for _, c := range []struct {
		name string
		cfg  generate.HybridConfig
	}{
		{"no-model", generate.HybridConfig{}},
		{"non-procedural-domain", generate.HybridConfig{Config: generate.Config{Model: m, Domains: []string{"genomics"}}}},
		{"unknown-domain", generate.HybridConfig{Config: generate.Config{Model: m, Domains: []string{"astrology"}}}},
		{"drift", generate.HybridConfig{Config: generate.Config{Model: m}, LengthDrift: 1.5}},
		{"too-short", generate.HybridConfig{Config: generate.Config{Model: m, Params: generate.Params{MinTokens: 100, MaxTokens: 200}}}},
	} {
		if _, err := generate.NewHybrid(c.cfg); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
	h, err := generate.NewHybrid(generate.HybridConfig{Config: generate.Config{Model: m, Domains: []string{"food-safety"}}})
	if err != nil {
		t.Fatal(err)
	}
	if h.Name() != "hybrid:openai:"+testutil.StubModelName {
		t.Errorf("name %q", h.Name())
	}
}

func TestDecodeRewording(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{`{"narrative": "A.\n\nB."}`, "A.\n\nB.", true},
		{"```json\n{\"narrative\": \" A. \"}\n```", "A.", true},
		{`{"narrative": ""}`, "", false},
		{`{}`, "", false},
		{`{"narrative": 3}`, "", false},
		{`{"narrative": "A."} {"narrative": "B."}`, "", false},
		{`{"narrative": "A.", "extra": 1}`, "", false},
		{`Sure: {"narrative": "A."}`, "", false},
		{"", "", false},
	} {
		got, err := generate.DecodeRewording(c.in)
		if c.ok != (err == nil) || got != c.want {
			t.Errorf("%q: %q, %v", c.in, got, err)
		}
		if err != nil && !errors.Is(err, generate.ErrMalformed) {
			t.Errorf("%q: error %v does not wrap ErrMalformed", c.in, err)
		}
	}
}

// generation.md documents the hybrid generator's reasons.
func TestGenerationSpecDocumentsHybrid(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(specDir, "generation.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for _, r := range generate.HybridReasons {
		if !strings.Contains(doc, "`"+string(r)+"`") {
			t.Errorf("generation.md does not document reason %s", r)
		}
	}
	for _, want := range []string{"--source hybrid", "--challenges hybrid", "±25 %"} {
		if !strings.Contains(doc, want) {
			t.Errorf("generation.md lacks %q", want)
		}
	}
	if generate.DefaultLengthDrift != 0.25 {
		t.Error("a default changed: update generation.md and this test")
	}
}

// TestHybridFigures measures the acceptance rate and the tokens per
// accepted set of faithful rewording on the stub (go test -run
// TestHybridFigures -v prints them).
func TestMeasureHybridFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("measurement")
	}
	if testutil.RaceEnabled {
		t.Skip("measurement over one goroutine: run without -race (the README's test command does)")
	}
	const attempts = 30
	h, sets, _ := newHybrid(t, faithfulBrain)
	for range attempts {
		o, err := h.Generate(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if o.Set != nil {
			assertGroundTruth(t, o.Set, sets)
		}
	}
	st := h.Stats()
	in, out := st.PerAccepted()
	rate := float64(st.Accepted) / float64(st.Attempts)
	t.Logf("faithful stub rewording: %d of %d attempts accepted (%.0f%%), rejected %v, dropped %v", st.Accepted, st.Attempts, 100*rate, st.Rejected, st.Dropped)
	t.Logf("tokens per accepted set (stub word counts): %.0f in / %.0f out; generation %+v in %d calls, cross-check %+v in %d calls",
		in, out, st.Generation, st.GenerationCalls, st.Check, st.CheckCalls)
	if rate < 0.5 {
		t.Errorf("faithful rewording accepted in only %.0f%% of attempts", 100*rate)
	}
}

// A question whose rewording fails its check keeps the skeleton's wording
// and is counted; the set is then not marked as LLM-worded unless every
// served question was reworded. A malformed question reply keeps every
// original wording.
func TestHybridQuestionRewordingFallback(t *testing.T) {
	t.Parallel() // CPU-bound under -race: lets the package use both cores
	t.Run("leaks-an-answer", func(t *testing.T) {
		var mu sync.Mutex
		leaked := map[string]string{} // question -> its leaking rewording
		h, sets, _ := newHybrid(t, func(sets []*skill.Set) testutil.Brain {
			answers := map[string]string{}
			for _, s := range sets {
				for _, p := range s.Parts {
					for _, q := range p.Questions {
						if q.AnswerType == skill.EntityAnswer {
							answers[q.Question] = q.Answer
						}
					}
				}
			}
			return rewordingQ(sets, func(text string, _ int) testutil.BrainReply { return rewordReply(faithful(text)) },
				func(q string) string {
					if a, ok := answers[q]; ok {
						r := stubRewordQuestion(q) + " Is it " + a + "?"
						mu.Lock()
						leaked[q] = r
						mu.Unlock()
						return r
					}
					return stubRewordQuestion(q)
				})
		})
		o := firstAccepted(t, h, 10)
		if o.QuestionsKept[generate.QuestionKeptAnswer] == 0 {
			t.Fatalf("no question kept for naming its answer: kept %v, reworded %d", o.QuestionsKept, o.QuestionsReworded)
		}
		k := skeletonOf(t, o.Set, sets)
		mu.Lock()
		defer mu.Unlock()
		for pi, p := range o.Set.Parts {
			for _, q := range p.Questions {
				for orig, r := range leaked {
					if q.Question == r {
						t.Errorf("part %d serves the leaking rewording %q (of %q)", pi+1, r, orig)
					}
				}
			}
		}
		if pv := o.Set.Provenance; pv == nil || pv.Source != skill.SourceHybrid {
			t.Errorf("provenance %+v", pv)
		} else {
			// LLMQuestions holds exactly when every served question differs
			// from its skeleton wording.
			all := true
			for pi, p := range o.Set.Parts {
				for _, q := range p.Questions {
					if slices.ContainsFunc(k.Parts[pi].Questions, func(kq skill.Question) bool { return kq.Question == q.Question }) {
						all = false
					}
				}
			}
			if pv.LLMQuestions != all {
				t.Errorf("LLMQuestions %v, every served question reworded %v", pv.LLMQuestions, all)
			}
		}
		if st := h.Stats(); st.QuestionsKept[generate.QuestionKeptAnswer] == 0 || st.QuestionsReworded == 0 {
			t.Errorf("stats %+v", st)
		}
	})
	t.Run("malformed-reply", func(t *testing.T) {
		h, sets, _ := newHybrid(t, func(sets []*skill.Set) testutil.Brain {
			narr := rewording(sets, func(text string, _ int) testutil.BrainReply { return rewordReply(faithful(text)) })
			return testutil.BrainFunc(func(req testutil.BrainRequest) testutil.BrainReply {
				if _, _, ok := questionsRequest(req); ok {
					return testutil.BrainReply{Text: "Sure! Here are the questions reworded."}
				}
				return narr.Reply(req)
			})
		})
		o := firstAccepted(t, h, 10)
		assertGroundTruth(t, o.Set, sets)
		if o.QuestionsReworded != 0 || o.QuestionsKept[generate.QuestionKeptMalformed] == 0 {
			t.Errorf("reworded %d, kept %v", o.QuestionsReworded, o.QuestionsKept)
		}
		if pv := o.Set.Provenance; pv == nil || pv.Source != skill.SourceHybrid || pv.LLMQuestions {
			t.Errorf("provenance %+v", pv)
		}
	})
}

func TestDecodeQuestionRewording(t *testing.T) {
	for _, c := range []struct {
		in   string
		want map[string]string
	}{
		{`{"questions": [{"id": "1.1", "question": " Which lot? "}, {"id": "2.3", "question": "How many?"}]}`, map[string]string{"1.1": "Which lot?", "2.3": "How many?"}},
		{"```json\n{\"questions\": [{\"id\": \"1.1\", \"question\": \"A?\"}]}\n```", map[string]string{"1.1": "A?"}},
		{`{"questions": []}`, nil},
		{`{"questions": [{"id": "1.1", "question": "A?"}, {"id": "1.1", "question": "B?"}]}`, nil},
		{`{"questions": [{"id": "one", "question": "A?"}]}`, nil},
		{`{"questions": [{"id": "1.1"}]}`, nil},
		{`{"questions": [{"id": "1.1", "question": "A?", "note": "x"}]}`, nil},
		{`{"questions": [{"id": "1.1", "question": "A?"}]} trailing`, nil},
		{`Here: {"questions": [{"id": "1.1", "question": "A?"}]}`, nil},
		{``, nil},
	} {
		got, err := generate.DecodeQuestionRewording(c.in)
		if (err == nil) != (c.want != nil) || fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%q: %v, %v", c.in, got, err)
		}
		if err != nil && !errors.Is(err, generate.ErrMalformed) {
			t.Errorf("%q: error %v does not wrap ErrMalformed", c.in, err)
		}
	}
}

// With the default white-box stage, validation runs the hybrid source's
// white-box attackers (the prompt-aware one and the procedural inverter)
// on the reworded set: the stub's shallow rewording leaves the skeleton's
// templates and promises readable, so they drop questions, and no served
// question is one any attacker answers.
func TestHybridWhiteBoxFilter(t *testing.T) {
	t.Parallel() // CPU-bound under -race: lets the package use both cores
	h, _, _ := newHybrid(t, faithfulBrain, func(c *generate.HybridConfig) { c.WhiteBox = generate.WhiteBoxAuto })
	var dropped int
	for range 3 {
		o, err := h.Generate(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if o.Report == nil {
			continue
		}
		for _, q := range o.Report.Questions {
			names := map[string]bool{}
			for _, a := range q.Scripts {
				names[a.Attacker] = true
				if a.Correct && q.Dropped == "" {
					t.Errorf("question %d.%d served though %s answered it", q.Part, q.Question, a.Attacker)
				}
			}
			if len(q.Scripts) > 0 && (!names[attack.PromptAware] || !names[attack.ProceduralInverter]) {
				t.Errorf("question %d.%d: white-box attackers not run: %v", q.Part, q.Question, names)
			}
		}
		for _, d := range o.Drops {
			if d.By == attack.ProceduralInverter || d.By == attack.PromptAware {
				dropped++
			}
		}
	}
	if dropped == 0 {
		t.Error("the white-box attackers answered nothing of a shallow rewording")
	}
}

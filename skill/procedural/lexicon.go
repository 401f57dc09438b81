package procedural

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/acaptcha/acaptcha/skill"
)

// label is a short answerable term: a cause, a category or a tier.
type label struct {
	text     string   // canonical form, at most skill.MaxAnswerChars
	phrase   string   // how a narrative states it (contains text for causes)
	variants []string // accepted answers, text first
}

func lab(text string, alts ...string) label {
	return label{text: text, phrase: text, variants: append([]string{text}, alts...)}
}

func cause(text, phrase string, alts ...string) label {
	return label{text: text, phrase: phrase, variants: append([]string{text}, alts...)}
}

// metricSpec is the per-candidate measurement of a stage. Values are fixed
// point integers scaled by 10^dec.
type metricSpec struct {
	name      string
	dec       int
	lo, hi    int64
	unit      string   // narrative suffix: "%", " µM", ""
	unitAlt   []string // further accepted suffixes
	prefixAlt []string // accepted prefixes ("OR ")
	lowSevere bool     // lower values are more severe (IC50)
	step      int64    // threshold rounding step
}

// entity is one candidate's names: a code, an optional full name and a
// descriptive alias (used as "the <desc>").
type entity struct {
	code, full, desc string
	variants         []string
}

type usedSet struct {
	keys []int
}

func (u *usedSet) has(k int) bool {
	for _, x := range u.keys {
		if x == k {
			return true
		}
	}
	return false
}

func (u *usedSet) add(k int) { u.keys = append(u.keys, k) }

type nameGen func(g *gen, used *usedSet) entity

// stage is one part's vocabulary inside a domain.
type stage struct {
	kind, kinds         string
	names               nameGen
	sig                 []string // singular noun phrases
	metric              metricSpec
	rep                 []string // plural noun phrases
	recheck             []string
	siteNoun, siteNouns string
	sites               []string
	causes              []label
	catDim              string
	cats                []label
	tagNoun             string
	tagVerbs            []string
	tagPrefixes         []string
	tagDigits           int
	linkSg, linkPl      string // ties this stage's entity to the previous stage's
	tierDim             string
	tiers               [3]label // low, middle, high severity
	intervalNoun        string
	titles              []string
}

type domain struct {
	name, desc  string
	reportWord  string
	fieldWord   string
	stages      [3]stage
	filler      []tpl
	teams       []string
	systems     []string
	emailDomain string
}

func lookupDomain(name string) *domain {
	for i := range domainTable {
		if domainTable[i].name == name {
			return &domainTable[i]
		}
	}
	return nil
}

// templates holds the generic paraphrase pools; every fact kind has at
// least five interchangeable phrasings.
type templates struct {
	persistPos, persistNeg   []tpl
	replPos, replNeg         []tpl
	intrinsic, attrib        []tpl
	wide, local              []tpl
	value, first, tag        []tpl
	link, cat, neutral       []tpl
	prelim, revise           []tpl
	bridge2, bridge3         []tpl
	ruleHi, ruleLo           []tpl
	ruleHiShort, ruleLoShort []tpl // without the intervals
	profileLead              []tpl // the value clause of a profile sentence
	filler                   []tpl
	fmtFiller                [nFormats][]tpl
	// clause[k] states fact kind k without its subject, for compound
	// sentences that carry two checks ("X reproduced ..., and had faded
	// ..."). anyFrames join any two clauses; sameFrames and mixedFrames
	// join clauses of equal or opposite polarity and carry "but" equally
	// often, so conjunctions do not reveal polarity.
	clause                             [fkLocal + 1][]tpl
	anyFrames, sameFrames, mixedFrames []tpl
	// numeric[cr] and numericClause[cr] state persistence, replication
	// or spread in the same words for both polarities: only the numbers
	// ("1 of 4" against "4 of 4", "retained 9%" against "retained 96%")
	// tell them apart.
	numeric, numericClause [nCrit][]tpl
	// numericMiss[cr] and numericMissClause[cr] count what is missing
	// instead ("lost 20%", "clean in 0 of 4", "absent at 3 of 4"), so the
	// size of a number alone does not give the polarity away.
	numericMiss, numericMissClause [nCrit][]tpl
	// prelim2 states the interim view naming a second candidate {y} it
	// weighed, in varying order and roles.
	prelim2 []tpl
	early   []tpl // neutral early mentions of any candidate
	// critPersist and critRepl state a part's bar for persistence (the
	// share {pct} of the first reading that must remain at the re-check)
	// and for replication (the {n} runs that must show the deviation).
	// Where a part states a bar, every statement of that check is a
	// measurement in the same words for both outcomes: only comparing it
	// with the bar gives the polarity.
	critPersist, critRepl []tpl
	// same[cr] ties a candidate's outcome on check cr to another
	// candidate's ({y}) in words shared by both outcomes: the outcome is
	// implied by the relation and the other candidate's own statement.
	same [nCrit][]tpl
}

var tx, domainTable, tablesErr = buildTables()

func buildTables() (templates, []domain, error) {
	var b tableBuilder
	var t templates
	t.persistPos = b.tpls(
		"At the {recheck} on {date}, the {sig} for {x} was still present.",
		"{x} still showed the same {sig} when it was re-examined on {date}.",
		"The {sig} attached to {x} had not eased by {date}, when the {recheck} took place.",
		"{x} carried its {sig} through to the {recheck} on {date} without any intervention.",
		"When the {recheck} came round on {date}, the {sig} for {x} was persisting at much the same level.",
		"By {date}, the {sig} for {x} looked as consistent as it had on the first day.",
		"Nothing had changed for {x} by the {recheck} on {date}; the {sig} remained in place.",
		"{x} had not faded by the {recheck} on {date}; the {sig} was still there.",
		"Nothing about the {sig} for {x} proved transient: it had not receded by {date}.",
		"The {sig} for {x} did not drift back to baseline before the {recheck} on {date}.",
	)
	t.persistNeg = b.tpls(
		"By the {recheck} on {date}, the {sig} for {x} had faded back to baseline on its own.",
		"{x} showed a {sig} that did not persist; it was gone by {date} without any intervention.",
		"When re-examined on {date}, {x} no longer displayed the {sig}, which had corrected itself.",
		"The {sig} for {x} proved transient and had receded before the {recheck} on {date}.",
		"{x} drifted back into its usual range by {date}, so its {sig} was not consistent over time.",
		"Nothing of the earlier {sig} for {x} remained at the {recheck} on {date}.",
	)
	t.replPos = b.tpls(
		"{x} reproduced the {sig} in {n} of {n} {rep}.",
		"Across {n} {rep}, {x} returned the same {sig} each time.",
		"The {sig} for {x} was reproducible: all {n} {rep} showed it.",
		"{x} gave a consistent {sig} in every one of the {n} {rep}.",
		"None of the {n} {rep} run on {x} came back without the {sig}.",
		"{x} was put through {n} {rep}, and the {sig} replicated in each.",
		"The {sig} for {x} was not the product of a single run; none of the {n} {rep} came back clean.",
		"Not one of the {n} {rep} on {x} failed to replicate the {sig}.",
	)
	t.replNeg = b.tpls(
		"{x} showed the {sig} in a single run, but the {m} {rep} that followed sat within the normal range.",
		"The {sig} for {x} was not reproducible: {m} further {rep} came back clean.",
		"Only the first of {m1} {rep} on {x} showed the {sig}; the pattern did not replicate.",
		"{x} was retested in {m} {rep}, none of which reproduced the {sig}.",
		"Attempts to replicate the {sig} for {x} in {m} {rep} were not consistent with the original reading.",
		"The {sig} for {x} appeared once and was absent from all {m} subsequent {rep}.",
	)
	t.intrinsic = b.tpls(
		"No external explanation emerged for {x}; checks for {cause} and similar artefacts came back clean.",
		"Controls run alongside {x}, including a check for {cause}, came back within specification, leaving its {sig} unexplained by the setup.",
		"{x} was checked for {cause} and for {causeB}, and neither accounted for its {sig}.",
		"A review of the handling record around {x} found nothing that would produce the {sig}.",
		"For {x}, the usual artefacts, {cause} among them, were each examined and found absent.",
		"Nothing in the record for {x} offers an outside reason for its {sig}, and {cause} was looked at specifically.",
		"Nothing traced the {sig} for {x} to {cause}, or to any other outside factor.",
		"The {sig} for {x} was not tied to {cause}; that check, like the others, came back clean.",
		"No check attributed the {sig} for {x} to {cause} or to anything else outside the {kind}.",
	)
	t.attrib = b.tpls(
		"The {sig} for {x} was later traced to {cause}.",
		"On {date}, the {sig} seen for {x} was tied to {cause} rather than to the {kind} itself.",
		"Follow-up on {date} showed that {cause} accounted for the {sig} for {x}.",
		"{x} was re-examined after a note from the team, and its {sig} was attributed to {cause}.",
		"The {sig} attached to {x} has since been explained by {cause}.",
		"Investigation on {date} linked the {sig} for {x} to {cause}, an outside factor.",
	)
	t.wide = b.tpls(
		"{x} showed the {sig} at all {k} {siteNouns}.",
		"The {sig} for {x} was seen at every participating {siteNoun}, {k} in total.",
		"{x} was not limited to one {siteNoun}; each of the {k} {siteNouns} recorded the {sig}.",
		"Readings from all {k} {siteNouns} carried the same {sig} for {x}.",
		"{x} displayed the {sig} consistently across the {k} {siteNouns} involved.",
		"The {sig} for {x} was not confined to one {siteNoun}; all {k} reported it.",
		"{x} was seen not only at {site} but at every other {siteNoun} as well.",
	)
	t.local = b.tpls(
		"The {sig} for {x} was confined to {site}; the other {k1} {siteNouns} saw nothing comparable.",
		"{x} showed the {sig} only at {site}.",
		"Outside {site}, none of the {siteNouns} recorded the {sig} for {x}.",
		"{x} persisted at {site} but nowhere else.",
		"Of the {k} {siteNouns}, only {site} reported the {sig} for {x}.",
	)
	t.value = b.tpls(
		"{x} came in at {val}.",
		"The {metric} recorded for {x} was {val}.",
		"{x} registered a reading of {val}.",
		"For {x}, the {metric} stood at {val}.",
		"The {metric} logged against {x} was {val}.",
		"Measured {metric} for {x}: {val}.",
	)
	t.first = b.tpls(
		"{x} was first flagged on {date}.",
		"The {sig} for {x} was first noted on {date}.",
		"{x} entered the review queue on {date}.",
		"It was on {date} that {x} first drew attention.",
		"{x} appeared in the log for the first time on {date}.",
	)
	t.tag = b.tpls(
		"{x} was {tagVerb} {tagNoun} {tag}.",
		"The paperwork shows {x} {tagVerb} {tagNoun} {tag}.",
		"{tagNoun} {tag} is the one associated with {x}.",
		"Records list {tagNoun} {tag} against {x}.",
		"For traceability, {x} was {tagVerb} {tagNoun} {tag}.",
	)
	t.link = b.tpls(
		"{x} {link} {ref}.",
		"According to the worklist, {x} {link} {ref}.",
		"In this round, {x} {link} {ref}.",
		"As the assignment sheet shows, {x} {link} {ref}.",
		"Per the plan agreed earlier, {x} {link} {ref}.",
	)
	t.cat = b.tpls(
		"The {catDim} recorded for {x} was {cat}.",
		"{x} was logged with {cat} as its {catDim}.",
		"For {x}, the {catDim} entry reads {cat}.",
		"The {catDim} field for {x} says {cat}.",
		"{x} carries {cat} in the {catDim} column.",
	)
	t.neutral = b.tpls(
		"{x} was processed with the rest of the set on {rdate}.",
		"Handling notes for {x} list nothing out of the ordinary.",
		"{x} was discussed briefly at the {pick:Monday|Tuesday|Wednesday|Thursday} coordination call.",
		"The data package for {x} ran to {n:40-180} pages.",
		"A second reviewer signed off the entries for {x} on {rdate}.",
		"{person} took over the paperwork for {x} midway through the period.",
	)
	t.prelim = b.tpls(
		"An interim summary dated {date} pointed to {x} as the source of the {sig}, citing its early {rep}.",
		"Early discussion settled on {x}; on the evidence available on {date}, its {sig} looked like the one that mattered.",
		"The first-pass review on {date} singled out {x} and recommended focusing follow-up effort on it.",
		"A preliminary note circulated on {date} read the {sig} for {x} as the decisive finding of the round.",
		"Initial consensus on {date} favoured {x}, whose {sig} stood out in the earliest data.",
	)
	t.revise = b.tpls(
		"That early reading of {x} did not hold up once the later data arrived.",
		"The interim view of {x} has since been revised.",
		"Later results overturned the first-pass emphasis on {x}.",
		"The preliminary interpretation of {x} was withdrawn after further work.",
		"The early focus on {x} was dropped when the full data set came in.",
	)
	t.bridge2 = b.tpls(
		"This round follows on from the earlier {kindPrev} review, in which one {kindPrev} stood apart once every check was in.",
		"Findings from the earlier {kindPrev} review shape the panel below.",
		"Following the earlier {kindPrev} review, attention moved to the {kinds} tied to that panel.",
		"With the first round of {kindPrev} work closed, the team turned to the {kinds} linked to it.",
		"The earlier review of {kindsPrev} set the agenda for the {kinds} discussed here.",
	)
	t.bridge3 = b.tpls(
		"This final round draws on both earlier reports: the {kindPrev2} that held up in the first and the {kindPrev} that came through the second.",
		"The two earlier rounds, first on {kindsPrev2} and then on {kindsPrev}, set up the work summarised here.",
		"Following the {kindPrev} review, and the {kindPrev2} screen before it, the focus shifted to the {kinds} below.",
		"What the earlier {kindPrev2} and {kindPrev} reviews established is taken as the starting point for the {kinds} below.",
		"The {kinds} below were chosen in light of both earlier rounds of work.",
	)
	t.ruleHi = b.tpls(
		"Under the escalation rule for this review, a {kind} whose {metric} exceeds {t2} is assigned {tierHi}, one above {t1} is assigned {tierMid}, and any other is assigned {tierLo}; the {intervalNoun} is {iHi}, {iMid} or {iLo} days respectively.",
		"Standing procedure sets the {tierDim} by {metric}: above {t2} means {tierHi}, above {t1} means {tierMid}, and {t1} or below means {tierLo}, with a {intervalNoun} of {iHi}, {iMid} and {iLo} days in that order.",
		"For {tierDim} purposes, {metric} values over {t2} map to {tierHi}, values over {t1} map to {tierMid}, and the rest map to {tierLo}; the matching {intervalNoun} is {iHi} days, {iMid} days or {iLo} days.",
		"The team applies a fixed rule: {tierHi} if the {metric} is above {t2}, {tierMid} if it is above {t1}, otherwise {tierLo}. Each {tierDim} carries its own {intervalNoun}: {iHi} days for {tierHi}, {iMid} for {tierMid} and {iLo} for {tierLo}.",
		"If a {kind} shows a {metric} above {t2} it goes to {tierHi} ({intervalNoun} {iHi} days); if above {t1}, to {tierMid} ({iMid} days); otherwise to {tierLo} ({iLo} days).",
	)
	t.ruleLo = b.tpls(
		"Under the escalation rule for this review, a {kind} whose {metric} falls below {t2} is assigned {tierHi}, one below {t1} is assigned {tierMid}, and any other is assigned {tierLo}; the {intervalNoun} is {iHi}, {iMid} or {iLo} days respectively.",
		"Standing procedure sets the {tierDim} by {metric}: below {t2} means {tierHi}, below {t1} means {tierMid}, and {t1} or above means {tierLo}, with a {intervalNoun} of {iHi}, {iMid} and {iLo} days in that order.",
		"For {tierDim} purposes, {metric} values under {t2} map to {tierHi}, values under {t1} map to {tierMid}, and the rest map to {tierLo}; the matching {intervalNoun} is {iHi} days, {iMid} days or {iLo} days.",
		"The team applies a fixed rule: {tierHi} if the {metric} is below {t2}, {tierMid} if it is below {t1}, otherwise {tierLo}. Each {tierDim} carries its own {intervalNoun}: {iHi} days for {tierHi}, {iMid} for {tierMid} and {iLo} for {tierLo}.",
		"If a {kind} shows a {metric} below {t2} it goes to {tierHi} ({intervalNoun} {iHi} days); if below {t1}, to {tierMid} ({iMid} days); otherwise to {tierLo} ({iLo} days).",
	)
	t.clause[fkPersistPos] = b.tpls(
		"still showed its {sig} at the {recheck} on {date}",
		"kept its {sig} through to the {recheck} on {date}",
		"had not eased by the {recheck} on {date}",
		"was still persisting at much the same level on {date}",
		"looked as consistent on {date} as on the first day",
		"had not faded by the {recheck} on {date}",
		"was not transient, and was still present on {date}",
	)
	t.clause[fkPersistNeg] = b.tpls(
		"had faded back to baseline by the {recheck} on {date}",
		"no longer showed its {sig} by {date}",
		"proved transient, with the {sig} gone before the {recheck} on {date}",
		"drifted back into its usual range by {date}",
		"did not persist past {date}",
	)
	t.clause[fkReplPos] = b.tpls(
		"reproduced its {sig} in {n} of {n} {rep}",
		"returned the same {sig} across {n} {rep}",
		"replicated in every one of {n} {rep}",
		"gave a consistent {sig} in all {n} {rep}",
		"came back the same way in each of {n} {rep}",
		"did not come back clean in any of {n} {rep}",
	)
	t.clause[fkReplNeg] = b.tpls(
		"showed its {sig} once but not in the {m} {rep} that followed",
		"was not reproducible in {m} further {rep}",
		"failed to replicate across {m} {rep}",
		"came back clean in all {m} subsequent {rep}",
		"gave no consistent {sig} in {m} {rep}",
	)
	t.clause[fkIntrinsic] = b.tpls(
		"had no external explanation, with the check for {cause} clean",
		"was checked for {cause} and for {causeB} without either accounting for its {sig}",
		"left nothing in its handling record that would explain the {sig}",
		"came through its control checks, {cause} included, within specification",
		"showed no sign of {cause} or of any other outside factor",
		"was not tied to {cause} or to any other outside factor",
		"had nothing traced to {cause}",
	)
	t.clause[fkAttrib] = b.tpls(
		"had its {sig} traced to {cause}",
		"turned out to reflect {cause}",
		"was later explained by {cause}",
		"saw its {sig} attributed on {date} to {cause}",
		"was tied to {cause} rather than to the {kind} itself",
	)
	t.clause[fkWide] = b.tpls(
		"showed the {sig} at all {k} {siteNouns}",
		"was seen at every one of the {k} {siteNouns}",
		"was not limited to one {siteNoun}",
		"appeared across all {k} {siteNouns}",
		"was recorded at each participating {siteNoun}",
		"was not confined to one {siteNoun}",
		"appeared not only at {site} but at all {k} {siteNouns}",
	)
	t.clause[fkLocal] = b.tpls(
		"showed the {sig} only at {site}",
		"was confined to {site}",
		"persisted at {site} but nowhere else",
		"appeared at {site} and at none of the other {k1} {siteNouns}",
		"stayed local to {site}",
	)
	t.anyFrames = b.tpls(
		"{x} {A}, and {B}.",
		"{x} {A} and {B}.",
		"{x} {A}; it also {B}.",
		"While {x} {A}, it {B}.",
		"{x} {A}, and it {B}.",
		"In addition to the fact that it {A}, {x} {B}.",
	)
	t.sameFrames = b.tpls(
		"{x} not only {A} but also {B}.",
		"{x} {A}, but it also {B}.",
		"{x} {A}; however, it also {B}.",
	)
	t.mixedFrames = b.tpls(
		"{x} {A}, but {B}.",
		"{x} {A}, but it {B}.",
		"{x} {A}; however, it {B}.",
	)
	t.prelim2 = b.tpls(
		"An interim summary dated {date} favoured {x} over {y}, citing its early {rep}.",
		"On {date}, the first-pass review set {y} aside and singled out {x} for follow-up.",
		"Although {y} was also discussed, a preliminary note circulated on {date} read the {sig} for {x} as the decisive finding.",
		"Initial consensus on {date} favoured {x} rather than {y}, whose {sig} looked weaker in the earliest data.",
		"{y} and {x} were both on the table on {date}, and the interim view settled on the latter.",
		"The interim ranking of {date} put {x} first and {y} second.",
	)
	t.numericMiss[crPersist] = b.tpls(
		"At the {recheck} on {date}, {x} had lost {pct}% of its initial {sig}.",
		"{x} had shed {pct}% of its starting {sig} by the {recheck} on {date}.",
		"Measured again on {date}, the {sig} for {x} was down {pct}% on its first reading.",
		"By {date}, {pct}% of the original {sig} for {x} had gone.",
	)
	t.numericMiss[crRepl] = b.tpls(
		"{x} came back clean in {n} of {m} {rep}.",
		"Of {m} {rep} run on {x}, {n} lacked the {sig}.",
		"The {sig} for {x} was missing from {n} of the {m} {rep}.",
		"Tallying the {rep} for {x}: {n} of {m} came back without the {sig}.",
	)
	t.numericMiss[crWide] = b.tpls(
		"The {sig} for {x} was absent at {n} of the {k} {siteNouns}.",
		"Of the {k} {siteNouns}, {n} saw no {sig} for {x}.",
		"{x} registered no {sig} at {n} out of {k} {siteNouns}.",
		"Site returns show {n} of {k} {siteNouns} without the {sig} for {x}.",
	)
	t.numericMissClause[crPersist] = b.tpls(
		"had lost {pct}% of its initial {sig} by the {recheck} on {date}",
		"was down {pct}% on its first reading by {date}",
		"had shed {pct}% of its starting {sig} by {date}",
	)
	t.numericMissClause[crRepl] = b.tpls(
		"came back clean in {n} of {m} {rep}",
		"lacked the {sig} in {n} of {m} {rep}",
		"was missing the {sig} in {n} of the {m} {rep}",
	)
	t.numericMissClause[crWide] = b.tpls(
		"was absent at {n} of the {k} {siteNouns}",
		"registered no {sig} at {n} of {k} {siteNouns}",
		"went unrecorded at {n} of the {k} {siteNouns}",
	)
	t.numeric[crPersist] = b.tpls(
		"At the {recheck} on {date}, {x} retained {pct}% of its initial {sig}.",
		"{x} kept {pct}% of its starting {sig} by the {recheck} on {date}.",
		"Measured again on {date}, the {sig} for {x} stood at {pct}% of its first reading.",
		"The {recheck} on {date} put {x} at {pct}% of the {sig} it showed when first flagged.",
		"By {date}, {pct}% of the original {sig} for {x} was still there.",
	)
	t.numeric[crRepl] = b.tpls(
		"{x} cleared the cut-off in {n} of {m} {rep}.",
		"Of {m} {rep} run on {x}, {n} showed the {sig}.",
		"The {sig} for {x} came up in {n} of the {m} {rep}.",
		"{x} returned the {sig} in {n} out of {m} {rep}.",
		"Tallying the {rep} for {x}: {n} of {m} carried the {sig}.",
	)
	t.numeric[crWide] = b.tpls(
		"{x} showed the {sig} at {n} of the {k} {siteNouns}.",
		"The {sig} for {x} was recorded at {n} of {k} {siteNouns}.",
		"Of the {k} {siteNouns}, {n} reported the {sig} for {x}.",
		"Site returns put {x} at {n} of {k} {siteNouns} with the {sig}.",
		"{x} registered the {sig} at {n} out of {k} {siteNouns}.",
	)
	t.numericClause[crPersist] = b.tpls(
		"retained {pct}% of its initial {sig} at the {recheck} on {date}",
		"kept {pct}% of its starting {sig} by {date}",
		"stood at {pct}% of its first reading when measured again on {date}",
		"was at {pct}% of its original {sig} by the {recheck} on {date}",
		"still had {pct}% of the {sig} on {date}",
	)
	t.numericClause[crRepl] = b.tpls(
		"cleared the cut-off in {n} of {m} {rep}",
		"showed the {sig} in {n} of {m} {rep}",
		"came up in {n} of the {m} {rep}",
		"returned the {sig} in {n} out of {m} {rep}",
		"carried the {sig} in {n} of {m} {rep}",
	)
	t.numericClause[crWide] = b.tpls(
		"showed the {sig} at {n} of the {k} {siteNouns}",
		"was recorded at {n} of {k} {siteNouns}",
		"appeared at {n} of the {k} {siteNouns}",
		"registered at {n} out of {k} {siteNouns}",
		"was reported by {n} of {k} {siteNouns}",
	)
	t.early = b.tpls(
		"An early note on {date} flagged {x} for follow-up.",
		"{x} was among the first entries on the watch list drawn up on {date}.",
		"The kick-off meeting on {date} asked for {x} to be looked at closely.",
		"Someone on the team suggested early on that {x} deserved attention.",
		"{x} was added to the priority list at the start of the round.",
	)
	t.critPersist = b.tpls(
		"For this review, a {sig} only counts as lasting if at least {pct}% of it remains at the {recheck}.",
		"The protocol treats a {sig} as persistent when {pct}% or more of the first reading is still there at the {recheck}.",
		"Persistence was judged against a fixed bar: at least {pct}% of the initial {sig} had to survive to the {recheck}.",
		"Anything under {pct}% of the starting {sig} at the {recheck} was treated as having faded.",
		"The team agreed in advance that a {sig} keeping less than {pct}% of its first reading by the {recheck} would count as transient.",
	)
	t.critRepl = b.tpls(
		"A {sig} counts as replicated only when at least {n} of the {rep} reproduce it.",
		"The protocol requires the {sig} to show up in {n} or more of the {rep} before it is called reproducible.",
		"Replication was judged against a fixed bar: the {sig} had to come up in at least {n} {rep}.",
		"Fewer than {n} positive {rep} means the {sig} is treated as not replicated.",
		"The team agreed in advance that a {sig} seen in fewer than {n} of the {rep} would count as a one-off.",
	)
	t.same[crPersist] = b.tpls(
		"At its {recheck} on {date}, {x} looked just as {y} had at its own.",
		"The {recheck} on {date} found {x} in exactly the state {y} was in at the same stage.",
		"Over time, the {sig} for {x} followed the course of the one for {y}; its {recheck} was on {date}.",
		"When {x} was looked at again on {date}, its {sig} had gone the way of the one for {y}.",
		"{x} was re-checked on {date}, and on persistence it matched {y} exactly.",
	)
	t.same[crRepl] = b.tpls(
		"In the {rep}, {x} fared exactly as {y} did.",
		"On replication, {x} came out the same way as {y}.",
		"The {rep} told the same story for {x} as for {y}.",
		"Whatever the {rep} showed for {y}, they showed for {x} as well.",
		"{x} and {y} were run through the {rep} together, with identical outcomes.",
	)
	t.same[crIntrinsic] = b.tpls(
		"On the question of an outside cause, {x} and {y} came out the same way.",
		"Whatever explained, or failed to explain, the {sig} for {y} applied equally to {x}.",
		"The checks for outside factors gave the same result for {x} as for {y}.",
		"{x} shared its handling record with {y}, and the review of outside causes reached the same conclusion for both.",
		"For {x}, the search for an external explanation ended exactly as it had for {y}.",
	)
	t.same[crWide] = b.tpls(
		"{x} was reported by exactly the same {siteNouns} as {y}.",
		"The {siteNoun} returns for {x} matched those for {y} one for one.",
		"Where the {sig} showed up for {y}, it showed up for {x}, and nowhere else.",
		"{x} and {y} had identical {siteNoun} coverage.",
		"The {siteNouns} that saw the {sig} for {y} were the ones that saw it for {x}.",
	)
	t.ruleHiShort = b.tpls(
		"Under the escalation rule for this review, a {metric} above {t2} means {tierHi}, above {t1} means {tierMid}, and anything else {tierLo}.",
		"The {tierDim} follows the {metric}: {tierHi} above {t2}, {tierMid} above {t1}, otherwise {tierLo}.",
		"Standing procedure assigns {tierHi} to any {kind} with a {metric} over {t2}, {tierMid} to one over {t1}, and {tierLo} to the rest.",
		"For {tierDim} purposes, {metric} values over {t2} map to {tierHi}, values over {t1} to {tierMid}, and lower values to {tierLo}.",
		"The team's rule: {tierHi} when the {metric} exceeds {t2}, {tierMid} when it exceeds {t1}, {tierLo} otherwise.",
	)
	t.ruleLoShort = b.tpls(
		"Under the escalation rule for this review, a {metric} below {t2} means {tierHi}, below {t1} means {tierMid}, and anything else {tierLo}.",
		"The {tierDim} follows the {metric}: {tierHi} below {t2}, {tierMid} below {t1}, otherwise {tierLo}.",
		"Standing procedure assigns {tierHi} to any {kind} with a {metric} under {t2}, {tierMid} to one under {t1}, and {tierLo} to the rest.",
		"For {tierDim} purposes, {metric} values under {t2} map to {tierHi}, values under {t1} to {tierMid}, and higher values to {tierLo}.",
		"The team's rule: {tierHi} when the {metric} falls below {t2}, {tierMid} when it falls below {t1}, {tierLo} otherwise.",
	)
	t.profileLead = b.tpls(
		"came in at {val}",
		"registered {val}",
		"recorded a {metric} of {val}",
		"showed {val} on {metric}",
		"logged {val}",
	)
	t.filler = b.tpls(
		"The next coordination call is scheduled for {rdate}.",
		"Two analysts were out for part of the week, and cover was arranged through the shared rota.",
		"Storage for the raw exports is at {n:61-94}% of quota, and archiving is planned.",
		"Document control reference {code} was updated to reflect the current distribution list.",
		"Minutes from the {pick:Monday|Wednesday|Friday} meeting were circulated to {n:6-19} recipients.",
		"No change was made to the reporting template during this period.",
		"Budget line {code} remains within its quarterly allocation.",
		"Training records for new staff were updated on {rdate}.",
		"An external auditor asked for read access to the project folder, which was granted for {n:5-14} days.",
		"The shared calendar lists a maintenance window on {rdate} starting at {time} and lasting {n:2-6} hours.",
		"{person} has agreed to act as the point of contact while the review is open.",
		"Archived material from the previous quarter was moved to cold storage on {rdate}.",
	)
	t.fmtFiller[fmtEmail] = b.tpls(
		"Thanks for turning this round so quickly.",
		"Adding {person} for visibility.",
		"Happy to go through any of this on the {pick:morning|afternoon} call.",
		"Apologies for the delay in getting this out.",
		"I have copied the raw exports to the shared folder under reference {code}.",
	)
	t.fmtFiller[fmtFieldNotes] = b.tpls(
		"Weather overcast, {n:7-21} °C on arrival.",
		"Badge access at the gate took {n:5-25} minutes this morning.",
		"Spoke briefly with {person} about scheduling for the rest of the week.",
		"Notebook pages {n:12-60} to {n:61-99} cover the raw observations.",
		"Left at {time} after a walk-through with the shift lead.",
	)
	t.fmtFiller[fmtAuditLog] = b.tpls(
		"Record saved; checksum {code} attached.",
		"Session closed after {n:3-40} minutes of activity.",
		"Export queued for the nightly archive run.",
		"Permissions unchanged; reviewer list carried over from the previous case.",
		"Attachment count now {n:4-31}.",
	)
	t.fmtFiller[fmtMemo] = b.tpls(
		"Please route any comments through the usual channel by {rdate}.",
		"A fuller annex is available on request.",
		"This memo supersedes the circulation list issued last month.",
		"Distribution is limited to the named recipients.",
		"Questions on scheduling can go to {person}.",
	)
	t.fmtFiller[fmtReport] = b.tpls(
		"All raw data are archived under reference {code}.",
		"Method details follow the standard operating procedure, revision {n:3-12}.",
		"Figures in this report are rounded as recorded in the source files.",
		"Reviewer comments have been incorporated into this version.",
		"The appendix lists instrument settings in full.",
	)
	t.fmtFiller[fmtIncident] = b.tpls(
		"Stakeholders were updated at {time} on {rdate}.",
		"The bridge call ran for {n:25-95} minutes.",
		"Ticket ownership moved to {person} for the overnight period.",
		"Communications to external parties remain on hold pending review.",
		"A post-incident review is pencilled in for {rdate}.",
	)
	doms := buildDomains(&b)
	if err := b.err(); err != nil {
		return t, doms, err
	}
	if err := checkDomains(doms); err != nil {
		return t, doms, err
	}
	return t, doms, nil
}

// checkDomains verifies the hand-written tables: enough entries for the
// world model and every answerable string within the answer limits.
func checkDomains(doms []domain) error {
	var errs []error
	short := func(where, s string) {
		if n := utf8.RuneCountInString(s); n == 0 || n > skill.MaxAnswerChars {
			errs = append(errs, fmt.Errorf("%s: %q has %d characters", where, s, n))
		}
	}
	for di := range doms {
		d := &doms[di]
		if len(d.filler) < 10 {
			errs = append(errs, fmt.Errorf("domain %s: %d filler templates, want >= 10", d.name, len(d.filler)))
		}
		for si := range d.stages {
			s := &d.stages[si]
			where := d.name + "/" + s.kind
			switch {
			case s.names == nil:
				errs = append(errs, fmt.Errorf("%s: no name generator", where))
			case len(s.causes) < 6, len(s.cats) < 4, len(s.sites) < 6, len(s.sig) < 2,
				len(s.rep) < 1, len(s.recheck) < 1, len(s.titles) < 2:
				errs = append(errs, fmt.Errorf("%s: vocabulary too small", where))
			case si > 0 && (s.linkSg == "" || s.linkPl == ""):
				errs = append(errs, fmt.Errorf("%s: missing link verbs", where))
			case si < 2 && (len(s.tagVerbs) == 0 || len(s.tagPrefixes) == 0 || s.tagNoun == ""):
				errs = append(errs, fmt.Errorf("%s: missing tags", where))
			case s.metric.hi <= s.metric.lo || s.metric.step <= 0:
				errs = append(errs, fmt.Errorf("%s: bad metric range", where))
			}
			for _, l := range s.causes {
				for _, v := range l.variants {
					short(where+" cause", v)
				}
				if !strings.Contains(l.phrase, l.text) {
					errs = append(errs, fmt.Errorf("%s: cause phrase %q does not state %q", where, l.phrase, l.text))
				}
			}
			for _, l := range s.cats {
				for _, v := range l.variants {
					short(where+" category", v)
				}
			}
			for _, l := range s.tiers {
				for _, v := range l.variants {
					short(where+" tier", v)
				}
			}
		}
	}
	if len(doms) < 5 {
		errs = append(errs, errors.New("fewer than five domains"))
	}
	return errors.Join(errs...)
}

package attack

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// stem reduces a lower-cased word to a crude matching key: possessives are
// dropped, a plural s is stripped from short words and long words are
// truncated to their first six letters (truncation stemming), so that
// "replicates", "replicated" and "replication" share the key "replic".
func stem(low string) string {
	low = strings.TrimSuffix(low, "'s")
	low = strings.TrimSuffix(low, "’s")
	n := utf8.RuneCountInString(low)
	if n > 6 {
		i := 0
		for j := range low {
			if i == 6 {
				return low[:j]
			}
			i++
		}
		return low
	}
	if n > 3 && strings.HasSuffix(low, "s") && !strings.HasSuffix(low, "ss") {
		return low[:len(low)-1]
	}
	return low
}

// cue weights: positive cues mark a finding that held up (persistence,
// replication, consistency), negative cues mark one that was explained away
// (transience, attribution to an external cause, a single observation,
// a preliminary conclusion later revised).
var (
	posExact = map[string]float32{
		"held": 1, "systemic": 1.5, "throughout": 1, "ongoing": 1, "every": 0.5, "each": 0.5,
		"all": 0.5, "recurrent": 1.5, "multi-day": 1, "multi-week": 1, "week-over-week": 1,
		"uninterrupted": 1.5, "unabated": 1.5, "lasting": 1.5, "entrenched": 1.5, "sticky": 1,
		"genuine": 1, "real": 0.5, "structural": 1, "chronic": 1, "cumulative": 0.5,
	}
	posStem = map[string]float32{
		"persis": 2, "sustai": 2, "reprod": 2, "replic": 1.5, "consis": 1.5, "recurr": 1.5,
		"robust": 1, "durabl": 1.5, "corrob": 1.5, "confir": 1.5, "verifi": 1, "valida": 1,
		"indepe": 1, "multip": 0.5, "across": 0.5, "consec": 1.5, "succes": 1, "repeat": 1.5,
		"remain": 1, "contin": 1, "stable": 0.5, "genuin": 1, "steady": 1, "steadi": 1,
		"escala": 0.5, "endure": 1.5, "enduri": 1.5, "prolon": 1.5, "extend": 0.5, "relent": 1.5,
		"concor": 1, "agreem": 0.5, "stubbo": 1.5,
	}
	negExact = map[string]float32{
		"self-corrected": 2.5, "self-resolved": 2.5, "self-correcting": 2.5, "self-limiting": 2,
		"baseline-normal": 2.5, "one-off": 2, "one-time": 1.5, "single": 1.5, "once": 1,
		"brief": 1, "briefly": 1, "glitch": 2, "noise": 1.5, "noisy": 1.5, "spurious": 2,
		"however": 1, "but": 0.5, "although": 0.5, "though": 0.5, "only": 0.5, "false": 1.5,
		"drift": 0.5, "due": 1, "early": 0.5, "benign": 1.5, "faded": 1.5, "subsided": 1.5,
		"unconfirmed": 2.5, "unreplicated": 2.5, "irreproducible": 2.5, "non-reproducible": 2.5,
		"inconclusive": 1.5, "momentary": 1.5, "fleeting": 1.5, "short-lived": 2, "blip": 2,
		"normal": 1, "normalised": 1, "normalized": 1, "baseline": 1, "error": 1, "errors": 1,
		"artifact": 2, "artefact": 2, "artifacts": 2, "artefacts": 2, "outlier": 1.5, "typo": 1.5,
		"within": 0.5, "back": 0.5, "returned": 1, "reverted": 1.5, "coincided": 0.5,
		"seasonal": 1, "holiday": 0.5, "sporadic": 1.5, "sporadically": 1.5, "intermittent": 1,
		"mislabelled": 1.5, "mislabeled": 1.5, "rounding": 1, "duplicate": 1, "ruled": 1.5,
		"dismissed": 1.5, "discounted": 1.5, "disregarded": 1.5, "withdrawn": 1.5,
		"isolated": 1.5, "localized": 1, "localised": 1, "limited": 0.5, "solitary": 1.5,
		"lone": 1, "merely": 1, "just": 0.5, "vanished": 1.5, "disappeared": 1.5, "dissipated": 1.5,
		"reversed": 1, "unrelated": 1.5, "innocuous": 1.5, "harmless": 1.5, "explainable": 1.5,
		"yet": 0.5, "seemed": 0.5, "appeared": 0.5, "looked": 0.5, "apparently": 0.5, "supposedly": 1,
	}
	negStem = map[string]float32{
		"transi": 2, "attrib": 2, "interf": 2, "tempor": 1, "resolv": 1.5, "explai": 1.5,
		"traced": 1, "calibr": 1.5, "coinci": 1, "retrac": 1.5, "revise": 1.5, "revisi": 1.5,
		"prelim": 1.5, "initia": 1, "supers": 1.5, "routin": 1, "schedu": 1, "mainte": 1,
		"confou": 1.5, "normal": 1, "contam": 0.5, "misatt": 2, "miscal": 2, "misrea": 2,
		"malfun": 1.5, "instru": 0.5, "reagen": 0.3, "dropou": 1, "outage": 1, "artifa": 2,
		"artefa": 2, "anomal": 0, "pertur": 0.5, "fluctu": 1, "bounce": 1, "rebound": 1,
		"correc": 1, "expect": 0.5, "provis": 1, "tentat": 1, "retrie": 0.3, "season": 1,
	}
	// negators flip the polarity of a cue within a few words after them.
	negators = map[string]bool{
		"not": true, "no": true, "never": true, "without": true, "failed": true, "fail": true,
		"fails": true, "unable": true, "neither": true, "nor": true, "lacked": true, "lacking": true,
		"absent": true, "none": true, "cannot": true, "didn't": true, "did't": true, "wasn't": true,
		"weren't": true, "isn't": true, "doesn't": true, "don't": true, "hasn't": true, "haven't": true,
	}
	// prelimWords mark a sentence that states a preliminary conclusion that
	// the narrative later revises: a mention there is a decoy.
	prelimWords = map[string]bool{
		"preliminary": true, "initially": true, "originally": true, "provisional": true,
		"provisionally": true, "tentative": true, "tentatively": true, "draft": true,
		"superseded": true, "revised": true, "retracted": true, "overturned": true,
		"first-pass": true, "early": true, "earlier": false, "interim": true, "premature": true,
		"prematurely": true, "erroneously": true, "mistakenly": true, "wrongly": true,
	}
)

// cueOf returns the positive and negative cue weight of one lower-cased
// word (before any negator flips it).
func cueOf(low, st string) (pos, neg float32) {
	if w, ok := posExact[low]; ok {
		pos = w
	} else if w, ok := posStem[st]; ok {
		pos = w
	}
	if w, ok := negExact[low]; ok {
		neg = w
	} else if w, ok := negStem[st]; ok {
		neg = w
	}
	if pos == 0 && neg == 0 && strings.IndexByte(low, '-') > 0 {
		// Hyphenated compounds: score the parts ("non-replicating").
		for _, part := range strings.Split(low, "-") {
			if part == "" {
				continue
			}
			if part == "non" || part == "un" {
				neg += 0.5
				continue
			}
			p, n := cueOf(part, stem(part))
			pos += p
			neg += n
		}
	}
	return pos, neg
}

// stopwords are ignored as question keywords.
var stopwords = toSet(`a an the of in on at to for by with from into onto over under about as and or nor but
is are was were be been being am do does did done has have had having will would shall should can could may might must
that this these those it its it's they them their theirs there here which what who whom whose when where why how
than then so such not no yes also only just very more most less least much many any some each every all both either
neither one ones other others another same own per via upon within without after before during while whereas
if unless because since until though although however therefore thus hence
report reports narrative text passage document memo section described mentioned stated noted given according
value number answer name identify identified specify give state provide indicate indicated based among between
s i we you he she his her him our your me my`)

// questionWords additionally dropped from question keywords.
var questionWords = toSet(`which what who whom whose how many much`)

// headStop words are never taken as a question's head noun.
var headStop = toSet(`of the a an in on at for by with from was were is are did does do has have had that
this these those its their to as and or exhibited showed shown received assigned`)

func toSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, f := range strings.Fields(s) {
		m[f] = true
	}
	return m
}

// numberWords maps spelled-out numbers to their value.
var numberWords = map[string]float64{
	"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
	"eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
	"fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
	"nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60,
	"seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100, "twice": 2, "thrice": 3,
	"dozen": 12, "single": 1, "once": 1, "duplicate": 2, "triplicate": 3, "quadruplicate": 4,
	"pair": 2, "both": 2,
}

// weakNumberWords are number words that more often mean something else
// ("one of", "a single", "both"); they are kept with a lower prior.
var weakNumberWords = toSet(`one single once pair both duplicate`)

// unit classes of numeric values.
type unitClass uint8

const (
	unitNone unitClass = iota
	unitPercent
	unitTemp
	unitTime
	unitConc
	unitMoney
	unitBps
	unitFold
	unitMass
	unitCount // a counted noun follows ("three labs")
)

var unitNames = [...]string{"", "percent", "temperature", "time", "concentration", "money", "basis points", "fold", "mass", "count"}

func (u unitClass) String() string {
	if int(u) < len(unitNames) {
		return unitNames[u]
	}
	return "?"
}

// unitWords maps a lower-cased token that follows a number to its class.
var unitWords = map[string]unitClass{
	"%": unitPercent, "percent": unitPercent, "pct": unitPercent, "per": unitPercent, "percentage": unitPercent,
	"pp": unitPercent, "points": unitPercent, "point": unitPercent,
	"°c": unitTemp, "°f": unitTemp, "°": unitTemp, "degrees": unitTemp, "degree": unitTemp, "celsius": unitTemp,
	"fahrenheit": unitTemp, "ºc": unitTemp,
	"s": unitTime, "sec": unitTime, "secs": unitTime, "second": unitTime, "seconds": unitTime,
	"ms": unitTime, "min": unitTime, "mins": unitTime, "minute": unitTime, "minutes": unitTime,
	"h": unitTime, "hr": unitTime, "hrs": unitTime, "hour": unitTime, "hours": unitTime,
	"day": unitTime, "days": unitTime, "week": unitTime, "weeks": unitTime, "month": unitTime,
	"months": unitTime, "year": unitTime, "years": unitTime, "quarter": unitTime, "quarters": unitTime,
	"session": unitTime, "sessions": unitTime, "cycle": unitTime, "cycles": unitTime,
	"µm": unitConc, "μm": unitConc, "um": unitConc, "nm": unitConc, "mm": unitConc, "pm": unitConc,
	"mg/l": unitConc, "mg/kg": unitConc, "µg/kg": unitConc, "μg/kg": unitConc, "ug/kg": unitConc,
	"ppm": unitConc, "ppb": unitConc, "cfu": unitConc, "cfu/g": unitConc, "cfu/ml": unitConc,
	"mg/dl": unitConc, "iu": unitConc, "u/l": unitConc, "mmol": unitConc, "mmol/l": unitConc,
	"µg/l": unitConc, "μg/l": unitConc, "ng/ml": unitConc, "µg/ml": unitConc, "μg/ml": unitConc,
	"log": unitConc, "copies/ml": unitConc, "mol": unitConc, "molar": unitConc, "µmol": unitConc,
	"mg": unitMass, "g": unitMass, "kg": unitMass, "µg": unitMass, "μg": unitMass, "ng": unitMass,
	"ml": unitMass, "l": unitMass, "tonnes": unitMass, "tons": unitMass, "kda": unitMass, "da": unitMass,
	"$": unitMoney, "usd": unitMoney, "eur": unitMoney, "€": unitMoney, "£": unitMoney, "gbp": unitMoney,
	"jpy": unitMoney, "¥": unitMoney, "million": unitMoney, "billion": unitMoney, "bn": unitMoney,
	"trillion": unitMoney, "dollars": unitMoney, "euros": unitMoney,
	"bp": unitBps, "bps": unitBps, "basis": unitBps,
	"fold": unitFold, "x": unitFold, "×": unitFold, "times": unitFold,
	"kb": unitMass, "mb": unitMass, "gb": unitMass, "tb": unitMass, "kib": unitMass, "mib": unitMass, "gib": unitMass,
}

// questionUnits maps a question keyword to the unit class it asks for.
var questionUnits = map[string]unitClass{
	"percent": unitPercent, "percentage": unitPercent, "%": unitPercent, "proportion": unitPercent,
	"share": unitPercent, "pct": unitPercent, "rate": unitPercent, "fraction": unitPercent,
	"temperature": unitTemp, "degrees": unitTemp, "celsius": unitTemp, "°c": unitTemp, "warm": unitTemp,
	"long": unitTime, "duration": unitTime, "days": unitTime, "hours": unitTime, "minutes": unitTime,
	"weeks": unitTime, "months": unitTime, "years": unitTime, "seconds": unitTime, "half-life": unitTime,
	"latency": unitTime, "delay": unitTime, "interval": unitTime, "window": unitTime, "period": unitTime,
	"quarters": unitTime, "sessions": unitTime, "dwell": unitTime,
	"concentration": unitConc, "µm": unitConc, "μm": unitConc, "nm": unitConc, "ic50": unitConc,
	"ec50": unitConc, "ki": unitConc, "km": unitConc, "ppm": unitConc, "ppb": unitConc, "titer": unitConc,
	"titre": unitConc, "cfu": unitConc, "cfu/g": unitConc, "mg/kg": unitConc, "µg/kg": unitConc,
	"price": unitMoney, "cost": unitMoney, "usd": unitMoney, "$": unitMoney, "dollars": unitMoney,
	"notional": unitMoney, "worth": unitMoney, "fee": unitMoney, "eur": unitMoney, "million": unitMoney,
	"bps": unitBps, "basis": unitBps, "spread": unitBps,
	"fold": unitFold, "dose": unitMass, "dosage": unitMass, "mg": unitMass, "weight": unitMass,
	"mass": unitMass,
}

// labelNouns are the words near which classification labels appear.
var labelNouns = toSet(`tier tiers class classes classification category categories grade grades level levels
status rating ratings designation designations priority severity tag flag band zone stage phase mode
label verdict disposition outcome bucket color colour code rank ranking risk alert type kind mechanism
profile pattern regime state signal grading scale classed categorised categorized`)

// labelVerbs introduce a label after them ("classified as amber").
var labelVerbs = toSet(`classified categorized categorised designated rated graded labelled labeled
flagged marked deemed assigned placed tagged moved escalated downgraded upgraded elevated reclassified
characterized characterised termed dubbed considered treated coded`)

// codeNouns precede an identifier that is a reference code, not a
// candidate entity ("reagent lot AB-342", "batch reference CD-891").
var codeNouns = toSet(`lot lots batch batches registry reference ref sample samples run runs ticket case
id serial version report scenario section figure table appendix sequence protocol form docket
invoice order account build release revision patch station room ward site bay line shelf`)

// headProxies stand in for the question's head noun in a narrative that
// introduces candidates generically ("a second candidate, MAP2K1").
var headProxies = toSet(`candidate candidates second third fourth fifth sixth final another finally
first latter former remaining`)

// notCandidate lists capitalised or upper-case words that are never
// candidate entities.
var notCandidate = toSet(`utc gmt cet cest est edt pst pdt am pm id ok usa us uk eu pdf qc qa rsd sop faq
et pt iso api url http https ceo cfo cto ai na n/a tbd fyi eta re fwd cc bcc mon tue wed thu fri sat sun
january february march april may june july august september october november december
jan feb mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday saturday sunday
the a an this that these those however finally additionally meanwhile subsequently moreover furthermore
in on at for of by with from after before during while although though when where which what who
section part appendix note notes summary table figure team teams group lab laboratory report memo
following further initial preliminary final first second third fourth fifth sixth one two three four five
dear hi hello regards thanks subject from to date re it its he she they we our their his her
mr mrs ms dr prof inc ltd llc co corp`)

// strongNameSuffixes are suffixes specific enough to admit a lower-case word.
var strongNameSuffixes = []string{"mab", "nib", "vir", "cillin", "mycin", "azole", "pril", "olol", "sartan", "statin", "parin"}

// isGreek reports whether r is a Greek letter.
func isGreek(r rune) bool { return unicode.Is(unicode.Greek, r) }

// greekNames are spelled-out Greek letters used in identifiers.
var greekNames = toSet(`alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron
pi rho sigma tau upsilon phi chi psi omega`)

// superlatives steer comparison questions.
var (
	maxWords = toSet(`highest largest greatest most biggest maximum max peak top strongest steepest widest
longest latest deepest heaviest fastest higher larger greater more bigger stronger longer widest`)
	minWords = toSet(`lowest smallest least fewest minimum min weakest shortest narrowest earliest slowest
lower smaller fewer less weaker shorter`)
	backWords = toSet(`previously earlier prior initial original first preceding former aforementioned
before above-mentioned previous originally`)
	causeWords = toSet(`caused cause causing responsible attributed due traced because driven drove
explained explains triggered led linked`)
)

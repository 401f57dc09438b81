package procedural

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/acaptcha/acaptcha/skill"
)

func buildDomains(b *tableBuilder) []domain {
	return []domain{
		biochemistry(b),
		cybersecurity(b),
		clinicalTrials(b),
		foodSafety(b),
		financialMarkets(b),
	}
}

// variants keeps the answerable forms: non-empty, within the answer length
// limit, case-insensitively distinct, at most skill.MaxVariants.
func variants(vs ...string) []string {
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		if v == "" || utf8.RuneCountInString(v) > skill.MaxAnswerChars {
			continue
		}
		dup := false
		for _, o := range out {
			if strings.EqualFold(o, v) {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, v)
		}
		if len(out) == skill.MaxVariants {
			break
		}
	}
	return out
}

// uniqueIndex draws an index in [0, n) not yet in used and records it.
func (g *gen) uniqueIndex(n int, used *usedSet) int {
	for range 16 {
		i := g.intn(n)
		if !used.has(i) {
			used.add(i)
			return i
		}
	}
	start := g.intn(n)
	for k := range n {
		i := (start + k) % n
		if !used.has(i) {
			used.add(i)
			return i
		}
	}
	return start // only reached if n < candidates, which checkDomains prevents
}

// digits returns a number of exactly w digits (no leading zero).
func (g *gen) digits(w int) string {
	lo := int(pow10(w - 1))
	return strconv.Itoa(lo + g.intn(lo*9))
}

// zdigits returns w digits, leading zeros allowed.
func (g *gen) zdigits(w int) string {
	var buf [8]byte
	for i := range w {
		buf[i] = byte('0' + g.intn(10))
	}
	return string(buf[:w])
}

func dehyphen(s string) string { return strings.ReplaceAll(s, "-", "") }

// ---- biochemistry ----

type triple struct{ code, full, desc string }

var enzymeBases = [...]triple{
	{"PFK", "phosphofructokinase", "rate-limiting glycolytic kinase"},
	{"HK", "hexokinase", "glucose-phosphorylating kinase"},
	{"LDH", "lactate dehydrogenase", "pyruvate-reducing dehydrogenase"},
	{"PK", "pyruvate kinase", "terminal glycolytic kinase"},
	{"GAPDH", "glyceraldehyde-3-phosphate dehydrogenase", "triose-oxidising dehydrogenase"},
	{"IDH", "isocitrate dehydrogenase", "cycle-entry decarboxylase"},
	{"G6PD", "glucose-6-phosphate dehydrogenase", "pentose-shunt gatekeeper"},
	{"ALDO", "aldolase", "hexose-cleaving lyase"},
	{"ENO", "enolase", "dehydrating glycolytic enzyme"},
	{"PGK", "phosphoglycerate kinase", "ATP-generating phosphotransferase"},
	{"TPI", "triosephosphate isomerase", "triose-interconverting isomerase"},
	{"MDH", "malate dehydrogenase", "oxaloacetate-forming dehydrogenase"},
	{"CS", "citrate synthase", "condensing enzyme of the cycle"},
	{"ACLY", "ATP citrate lyase", "cytosolic acetyl-CoA supplier"},
	{"FASN", "fatty acid synthase", "lipogenic megasynthase"},
	{"GLS", "glutaminase", "glutamine-deaminating amidase"},
	{"PDK", "pyruvate dehydrogenase kinase", "mitochondrial gate kinase"},
	{"CK", "creatine kinase", "phosphagen kinase"},
	{"ADA", "adenosine deaminase", "purine-salvage deaminase"},
	{"TYR", "tyrosinase", "copper-dependent oxidase"},
	{"COX", "cyclooxygenase", "prostanoid-forming oxygenase"},
	{"HMGCR", "HMG-CoA reductase", "sterol-pathway reductase"},
	{"SOD", "superoxide dismutase", "radical-scavenging dismutase"},
	{"AChE", "acetylcholinesterase", "choline-ester hydrolase"},
	{"MAO", "monoamine oxidase", "flavin amine oxidase"},
	{"DHFR", "dihydrofolate reductase", "folate-recycling reductase"},
	{"TK", "thymidine kinase", "nucleoside-salvage kinase"},
	{"GST", "glutathione S-transferase", "conjugating transferase"},
	{"CA", "carbonic anhydrase", "zinc-dependent hydratase"},
	{"PGAM", "phosphoglycerate mutase", "glycolytic mutase"},
	{"NQO", "quinone oxidoreductase", "two-electron quinone reductase"},
}

var romanNumerals = [...]string{"I", "II", "III", "IV"}

var greekLetters = [...]struct{ sym, name string }{
	{"α", "alpha"}, {"β", "beta"}, {"γ", "gamma"}, {"δ", "delta"},
}

// enzymeName: PFK1 / phosphofructokinase 1, HK-II / hexokinase II,
// LDH-γ / lactate dehydrogenase gamma.
func enzymeName(g *gen, used *usedSet) entity {
	b := &enzymeBases[g.uniqueIndex(len(enzymeBases), used)]
	switch g.intn(3) {
	case 0:
		d := strconv.Itoa(1 + g.intn(4))
		code, full := b.code+d, b.full+" "+d
		return entity{code, full, b.desc, variants(code, b.code+"-"+d, full, b.full+"-"+d)}
	case 1:
		k := g.intn(len(romanNumerals))
		r, d := romanNumerals[k], strconv.Itoa(k+1)
		code, full := b.code+"-"+r, b.full+" "+r
		return entity{code, full, b.desc, variants(code, b.code+"-"+d, b.code+d, b.code+r, full, b.full+" "+d)}
	default:
		gk := greekLetters[g.intn(len(greekLetters))]
		code, full := b.code+"-"+gk.sym, b.full+" "+gk.name
		return entity{code, full, b.desc, variants(code, b.code+"-"+gk.name, b.code+" "+gk.name, b.code+gk.sym, full)}
	}
}

var compoundPrefixes = [...]string{"BX", "KT", "ZL", "VR", "CMP", "ARN", "QX", "TLM", "HZ", "NB", "OPX", "RX", "DV", "WQ"}
var innHeads = [...]string{"vel", "ora", "tani", "zor", "cali", "mero", "lupa", "dexa", "fira", "quin", "sora", "belu", "nira", "teva", "osi", "para"}
var innMids = [...]string{"mo", "li", "ta", "ce", "ri", "da", "", "no"}
var innStems = [...]string{"stat", "tinib", "fenib", "ciclib", "parib", "lisib", "dustat", "rafenib"}
var chemotypes = [...]string{
	"quinazoline scaffold", "covalent acrylamide", "aminopyrimidine lead", "macrocyclic analogue",
	"indole carboxamide", "fluorinated biaryl", "sulfonamide series member", "spirocyclic hit",
	"benzimidazole fragment", "pyrazolopyrimidine", "natural-product derivative", "boronic acid series member",
	"thiazolidinedione analogue", "purine mimetic",
}

// compoundName: BX-4471 / velmotinib / the covalent acrylamide.
func compoundName(g *gen, used *usedSet) entity {
	desc := chemotypes[g.uniqueIndex(len(chemotypes), used)]
	code := compoundPrefixes[g.intn(len(compoundPrefixes))] + "-" + g.digits(3+g.intn(2))
	inn := innHeads[g.intn(len(innHeads))] + innMids[g.intn(len(innMids))] + innStems[g.intn(len(innStems))]
	return entity{code, inn, desc, variants(code, dehyphen(code), inn)}
}

var cellLines = [...]struct{ code, desc string }{
	{"HeLa", "cervical carcinoma line"}, {"HEK293", "embryonic kidney line"}, {"HepG2", "hepatoma line"},
	{"A549", "lung adenocarcinoma line"}, {"MCF-7", "luminal breast line"}, {"Caco-2", "colorectal epithelial line"},
	{"U2OS", "osteosarcoma line"}, {"K562", "myelogenous leukaemia line"}, {"Jurkat", "T-lymphocyte line"},
	{"SH-SY5Y", "neuroblastoma line"}, {"PC-3", "androgen-independent prostate line"}, {"HCT116", "colon carcinoma line"},
	{"THP-1", "monocytic line"}, {"PANC-1", "pancreatic duct line"}, {"MDA-MB-231", "triple-negative breast line"},
	{"HT-29", "colonic adenocarcinoma line"}, {"Huh7", "hepatocellular line"}, {"LNCaP", "androgen-sensitive prostate line"},
	{"Vero", "monkey kidney line"}, {"CHO-K1", "hamster ovary line"},
}

// cellLineName: HepG2-c12 / HepG2 clone 12 / the hepatoma line.
func cellLineName(g *gen, used *usedSet) entity {
	b := &cellLines[g.uniqueIndex(len(cellLines), used)]
	cl := strconv.Itoa(2 + g.intn(38))
	code, full := b.code+"-c"+cl, b.code+" clone "+cl
	return entity{code, full, b.desc, variants(code, b.code+" c"+cl, b.code+"c"+cl, full)}
}

// ---- cybersecurity ----

var cveNickHeads = [...]string{"Gate", "Spool", "Relay", "Vault", "Ledger", "Beacon", "Harbor", "Cinder", "Frost", "Echo", "Quill", "Lantern", "Anchor", "Copper", "Signal", "Paper"}
var cveNickTails = [...]string{"Bleed", "Storm", "Jack", "Breach", "Shock", "Drift", "Crash", "Hollow", "Leak", "Fall", "Lock", "Spill"}
var cveProducts = [...]string{
	"VPN-gateway flaw", "mail-relay flaw", "file-transfer appliance flaw", "print-spooler flaw", "SSO-portal flaw",
	"hypervisor-console flaw", "CI-runner flaw", "backup-agent flaw", "helpdesk-portal flaw", "router-firmware flaw",
	"logging-library flaw", "VoIP-server flaw", "badge-reader flaw", "web-proxy flaw", "HR-portal flaw", "container-runtime flaw",
}

// cveName: CVE-2024-31877 / GateBleed / the VPN-gateway flaw.
func cveName(g *gen, used *usedSet) entity {
	desc := cveProducts[g.uniqueIndex(len(cveProducts), used)]
	year := g.year - g.intn(4)
	num := g.digits(4 + g.intn(2))
	y := strconv.Itoa(year)
	code := "CVE-" + y + "-" + num
	nick := cveNickHeads[g.intn(len(cveNickHeads))] + cveNickTails[g.intn(len(cveNickTails))]
	return entity{code, nick, desc, variants(code, "CVE "+y+"-"+num, y+"-"+num, nick)}
}

var malwareHeads = [...]string{"Ghost", "Silk", "Iron", "Velvet", "Cobalt", "Onyx", "Hollow", "Lunar", "Tidal", "Rust", "Static", "Paper", "Ember", "Quartz", "Sable"}
var malwareTails = [...]string{"Raven", "Adder", "Lynx", "Moth", "Viper", "Heron", "Jackal", "Wren", "Mantis", "Otter", "Marten", "Kestrel", "Gecko"}
var malwareTraits = [...]string{
	"DNS-tunnelling implant", "signed-driver implant", "steganographic dropper", "Rust-compiled agent",
	"memory-resident stager", "USB-propagating worm", "Go-compiled toolkit", "macro-borne downloader",
	"cloud-storage exfiltrator", "webshell framework", "kernel-level rootkit", "browser-hijacking module",
}

// malwareName: GhostRaven / Win64/GhostRaven / the DNS-tunnelling implant.
func malwareName(g *gen, used *usedSet) entity {
	desc := malwareTraits[g.uniqueIndex(len(malwareTraits), used)]
	h, t := malwareHeads[g.intn(len(malwareHeads))], malwareTails[g.intn(len(malwareTails))]
	code := h + t
	full := "Win64/" + code
	return entity{code, full, desc, variants(code, h+" "+t, full)}
}

var hostCities = [...]struct{ code, name string }{
	{"ams", "Amsterdam"}, {"fra", "Frankfurt"}, {"sgp", "Singapore"}, {"nyc", "New York"}, {"lon", "London"},
	{"tyo", "Tokyo"}, {"syd", "Sydney"}, {"par", "Paris"}, {"mad", "Madrid"}, {"waw", "Warsaw"}, {"dub", "Dublin"}, {"tor", "Toronto"},
}
var hostDepts = [...]struct{ code, name string }{
	{"fin", "finance"}, {"hr", "HR"}, {"dev", "development"}, {"ops", "operations"}, {"sales", "sales"},
	{"legal", "legal"}, {"rnd", "research"}, {"it", "IT"}, {"mkt", "marketing"}, {"sec", "security"},
}

// hostName: ams-fin-042 / 10.42.7.19 / the Amsterdam finance machine.
func hostName(g *gen, used *usedSet) entity {
	k := g.uniqueIndex(len(hostCities)*len(hostDepts), used)
	c, d := hostCities[k/len(hostDepts)], hostDepts[k%len(hostDepts)]
	code := c.code + "-" + d.code + "-" + g.zdigits(3)
	ip := "10." + strconv.Itoa(1+g.intn(250)) + "." + strconv.Itoa(g.intn(255)) + "." + strconv.Itoa(2+g.intn(250))
	desc := c.name + " " + d.name + " machine"
	return entity{code, ip, desc, variants(code, ip, code+".corp")}
}

// ---- clinical trials ----

var drugPrefixes = [...]string{"ZX", "KRX", "VTP", "QLT", "MVX", "TRX", "BNV", "ORX", "DKA", "HLX", "NVR", "SLP"}
var drugHeads = [...]string{"vel", "ora", "tira", "zana", "cosi", "meri", "luba", "dexi", "fora", "quila", "sema", "beli", "nira", "pexi", "osa", "remi"}
var drugClasses = [...]struct{ stem, desc string }{
	{"tinib", "JAK-pathway agent"}, {"parib", "PARP-directed agent"}, {"mab", "monoclonal antibody"},
	{"gliptin", "DPP-4 agent"}, {"ciclib", "CDK4/6 agent"}, {"sartan", "angiotensin-receptor agent"},
	{"lisib", "PI3K-delta agent"}, {"vastatin", "statin-class agent"}, {"glutide", "GLP-1 agonist"},
	{"prazole", "proton-pump agent"}, {"lukast", "leukotriene antagonist"}, {"setron", "5-HT3 antagonist"},
}

// drugName: ZX-1147 / velotinib / the JAK-pathway agent.
func drugName(g *gen, used *usedSet) entity {
	c := &drugClasses[g.uniqueIndex(len(drugClasses), used)]
	code := drugPrefixes[g.intn(len(drugPrefixes))] + "-" + g.digits(3+g.intn(2))
	inn := drugHeads[g.intn(len(drugHeads))] + c.stem
	return entity{code, inn, c.desc, variants(code, dehyphen(code), inn)}
}

var adverseEvents = [...]struct{ code, full, desc, alt string }{
	{"DILI", "drug-induced liver injury", "hepatic finding", "liver injury"},
	{"QTc", "QTc prolongation", "cardiac conduction finding", "QT prolongation"},
	{"ILD", "interstitial lung disease", "pulmonary finding", "lung disease"},
	{"AKI", "acute kidney injury", "renal finding", "kidney injury"},
	{"PN", "peripheral neuropathy", "sensory nerve finding", "neuropathy"},
	{"FN", "febrile neutropenia", "febrile haematological finding", "neutropenia"},
	{"TCP", "thrombocytopenia", "platelet finding", "low platelets"},
	{"HGL", "hyperglycaemia", "glycaemic finding", "hyperglycemia"},
	{"MPR", "maculopapular rash", "cutaneous finding", "rash"},
	{"PANC", "pancreatitis", "pancreatic finding", "acute pancreatitis"},
	{"HNA", "hyponatraemia", "electrolyte finding", "hyponatremia"},
	{"UVT", "uveitis", "ocular finding", "eye inflammation"},
	{"HTN", "hypertension", "blood-pressure finding", "high blood pressure"},
	{"CLT", "colitis", "colonic finding", "immune colitis"},
	{"MYS", "myositis", "muscle finding", "muscle inflammation"},
	{"ANPH", "anaphylaxis", "hypersensitivity finding", "anaphylactic reaction"},
	{"SJS", "Stevens-Johnson syndrome", "mucocutaneous finding", "Stevens-Johnson"},
	{"PE", "pulmonary embolism", "thromboembolic finding", "embolism"},
}

// adverseEventName: ILD / interstitial lung disease / the pulmonary finding.
func adverseEventName(g *gen, used *usedSet) entity {
	a := &adverseEvents[g.uniqueIndex(len(adverseEvents), used)]
	return entity{a.code, a.full, a.desc, variants(a.code, a.full, a.alt)}
}

var pgxGenes = [...]struct {
	gene    string
	alleles []string
	desc    string
}{
	{"CYP2C19", []string{"*2", "*3", "*17"}, "slow-metaboliser CYP2C19 subgroup"},
	{"CYP2D6", []string{"*4", "*5", "*10", "*41"}, "reduced-function CYP2D6 subgroup"},
	{"CYP2C9", []string{"*2", "*3"}, "low-activity CYP2C9 subgroup"},
	{"UGT1A1", []string{"*28", "*6"}, "glucuronidation-deficient subgroup"},
	{"SLCO1B1", []string{"*5", "*15"}, "hepatic-uptake variant subgroup"},
	{"TPMT", []string{"*3A", "*3C"}, "thiopurine-methyltransferase variant subgroup"},
	{"DPYD", []string{"*2A", "*13"}, "pyrimidine-catabolism variant subgroup"},
	{"HLA-B", []string{"*57:01", "*15:02", "*58:01"}, "HLA-B risk-allele subgroup"},
	{"HLA-A", []string{"*31:01", "*02:01"}, "HLA-A risk-allele subgroup"},
	{"NUDT15", []string{"*3", "*2"}, "NUDT15 variant subgroup"},
	{"VKORC1", []string{"*2", "*3"}, "vitamin-K reductase variant subgroup"},
	{"CYP3A5", []string{"*3", "*6"}, "CYP3A5 non-expresser subgroup"},
	{"NAT2", []string{"*5", "*6", "*7"}, "slow-acetylator subgroup"},
}

// alleleName: HLA-B*57:01 / the HLA-B risk-allele subgroup.
func alleleName(g *gen, used *usedSet) entity {
	p := &pgxGenes[g.uniqueIndex(len(pgxGenes), used)]
	a := p.alleles[g.intn(len(p.alleles))]
	code := p.gene + a
	return entity{code, "", p.desc, variants(code, p.gene+" "+a, strings.ReplaceAll(code, ":", ""))}
}

// ---- food safety ----

var pathogenBases = [...]struct {
	abbr, short, long, desc string
	types                   func(g *gen) string
}{
	{"Lm", "L. monocytogenes", "Listeria monocytogenes", "cold-tolerant Gram-positive rod", func(g *gen) string { return "ST" + strconv.Itoa(1+g.intn(1200)) }},
	{"SE", "S. Enteritidis", "Salmonella Enteritidis", "egg-associated serovar", func(g *gen) string { return "PT" + strconv.Itoa(1+g.intn(35)) }},
	{"STm", "S. Typhimurium", "Salmonella Typhimurium", "multi-host serovar", func(g *gen) string { return "DT" + strconv.Itoa(1+g.intn(200)) }},
	{"STEC", "E. coli", "Escherichia coli", "Shiga-toxin producer", func(g *gen) string {
		return [...]string{"O157:H7", "O26:H11", "O103:H2", "O111:H8", "O145:H28", "O121:H19"}[g.intn(6)]
	}},
	{"Cj", "C. jejuni", "Campylobacter jejuni", "microaerophilic curved rod", func(g *gen) string { return "ST" + strconv.Itoa(20+g.intn(8000)) }},
	{"Bc", "B. cereus", "Bacillus cereus", "emetic-toxin spore former", func(g *gen) string { return "ST" + strconv.Itoa(1+g.intn(1500)) }},
	{"Sa", "S. aureus", "Staphylococcus aureus", "enterotoxigenic coccus", func(g *gen) string { return "t" + g.zdigits(3) }},
	{"Vp", "V. parahaemolyticus", "Vibrio parahaemolyticus", "halophilic vibrio", func(g *gen) string {
		return [...]string{"O3:K6", "O4:K8", "O1:KUT", "O4:K12"}[g.intn(4)]
	}},
	{"Ye", "Y. enterocolitica", "Yersinia enterocolitica", "psychrotrophic enteric", func(g *gen) string {
		return [...]string{"4/O:3", "2/O:9", "2/O:5,27", "1B/O:8"}[g.intn(4)]
	}},
	{"Cs", "C. sakazakii", "Cronobacter sakazakii", "infant-formula opportunist", func(g *gen) string { return "ST" + strconv.Itoa(1+g.intn(700)) }},
	{"NoV", "norovirus", "norovirus", "winter-vomiting calicivirus", func(g *gen) string {
		return [...]string{"GII.4", "GII.17", "GI.3", "GII.6", "GII.2"}[g.intn(5)]
	}},
	{"HAV", "hepatitis A virus", "hepatitis A virus", "enteric hepatitis virus", func(g *gen) string {
		return [...]string{"IA", "IB", "IIIA"}[g.intn(3)]
	}},
	{"Ss", "S. sonnei", "Shigella sonnei", "low-dose enteric", func(g *gen) string { return "ST" + strconv.Itoa(100+g.intn(900)) }},
}

// pathogenName: Lm-ST6 / Listeria monocytogenes ST6 / the cold-tolerant Gram-positive rod.
func pathogenName(g *gen, used *usedSet) entity {
	p := &pathogenBases[g.uniqueIndex(len(pathogenBases), used)]
	t := p.types(g)
	code := p.abbr + "-" + t
	return entity{code, p.long + " " + t, p.desc, variants(code, p.abbr+" "+t, p.short+" "+t, p.long+" "+t)}
}

var foodProducts = [...]string{
	"smoked salmon", "soft cheese", "bagged spinach", "frozen berries", "ground beef", "infant formula",
	"sprouted seeds", "deli ham", "ice cream", "raw-milk cheese", "pre-cut melon", "egg powder",
	"chicken pâté", "hummus", "sesame paste", "frozen corn",
}

// batchName: L-2231-K / batch L-2231-K / the smoked salmon batch.
func batchName(g *gen, used *usedSet) entity {
	prod := foodProducts[g.uniqueIndex(len(foodProducts), used)]
	code := string(rune('A'+g.intn(26))) + "-" + g.digits(4) + "-" + string(rune('A'+g.intn(26)))
	return entity{code, "", prod + " batch", variants(code, dehyphen(code), "batch "+code)}
}

var supplierNames = [...]string{"Kessler", "Okafor", "Lindqvist", "Moreau", "Brennan", "Novak", "Haddad", "Ferreira", "Kowalski", "Andersen", "Rossi", "Mensah", "Castillo", "Duarte", "Varga", "Quinn"}
var supplierKinds = [...]string{"Farms", "Dairy", "Produce", "Growers", "Fisheries", "Mills", "Packers"}
var supplierRegions = [...]string{"Andalusian", "Bavarian", "Breton", "Flemish", "Galician", "Lombard", "Moravian", "Silesian", "Tuscan", "Jutland", "Munster", "Alsatian"}
var supplierTypes = [...]string{"greenhouse grower", "dairy cooperative", "seed sprouter", "smokehouse", "berry packer", "abattoir", "spice importer", "egg farm"}

// supplierName: SUP-0412 / Kessler Farms / the Breton smokehouse.
func supplierName(g *gen, used *usedSet) entity {
	k := g.uniqueIndex(len(supplierRegions)*len(supplierTypes), used)
	desc := supplierRegions[k/len(supplierTypes)] + " " + supplierTypes[k%len(supplierTypes)]
	name := supplierNames[g.intn(len(supplierNames))] + " " + supplierKinds[g.intn(len(supplierKinds))]
	code := "SUP-" + g.zdigits(4)
	return entity{code, name, desc, variants(code, dehyphen(code), name)}
}

// ---- financial markets ----

var regions = [...]struct{ code, adj string }{
	{"US", "US"}, {"EZ", "euro-area"}, {"UK", "British"}, {"JP", "Japanese"}, {"CA", "Canadian"},
	{"AU", "Australian"}, {"DE", "German"}, {"CN", "Chinese"},
}
var indicatorBases = [...]triple{
	{"CPI", "consumer prices", "headline inflation gauge"},
	{"PPI", "producer prices", "factory-gate price gauge"},
	{"PMI", "manufacturing PMI", "factory survey"},
	{"SPMI", "services PMI", "services survey"},
	{"GDP", "output growth", "quarterly output print"},
	{"IP", "industrial production", "industrial output series"},
	{"CCI", "consumer confidence", "household sentiment survey"},
	{"HS", "housing starts", "residential construction series"},
	{"TB", "trade balance", "external balance print"},
	{"AHE", "hourly earnings", "wage growth print"},
	{"UR", "unemployment rate", "jobless rate"},
	{"RS", "retail sales", "consumer spending print"},
}

// indicatorName: UK CPI / UK consumer prices / the British headline inflation gauge.
func indicatorName(g *gen, used *usedSet) entity {
	b := &indicatorBases[g.uniqueIndex(len(indicatorBases), used)]
	r := regions[g.intn(len(regions))]
	code := r.code + " " + b.code
	full := r.code + " " + b.full
	return entity{code, full, r.adj + " " + b.desc, variants(code, r.code+"-"+b.code, r.code+b.code, full)}
}

var currencies = [...]struct{ code, nick string }{
	{"USD", "dollar"}, {"EUR", "euro"}, {"JPY", "yen"}, {"GBP", "sterling"}, {"CHF", "franc"},
	{"CAD", "loonie"}, {"AUD", "aussie"}, {"NZD", "kiwi"}, {"SEK", "krona"}, {"NOK", "krone"},
	{"MXN", "peso"}, {"ZAR", "rand"}, {"BRL", "real"}, {"PLN", "zloty"}, {"KRW", "won"},
	{"CNH", "yuan"}, {"TRY", "lira"}, {"HUF", "forint"}, {"CZK", "koruna"},
}

// pairName: EUR/JPY / euro-yen / the euro-yen cross. Base currencies are
// distinct within a part, so no two pairs share a description.
func pairName(g *gen, used *usedSet) entity {
	a := currencies[g.uniqueIndex(len(currencies), used)]
	var b = a
	for b.code == a.code {
		b = currencies[g.intn(len(currencies))]
	}
	code := a.code + "/" + b.code
	nick := a.nick + "-" + b.nick
	return entity{code, "", nick + " cross", variants(code, a.code+b.code, a.code+"-"+b.code, a.code+" "+b.code)}
}

var fundAdjs = [...]string{"Halcyon", "Meridian", "Northgate", "Ashford", "Larkspur", "Kestrel", "Bellwether", "Juniper", "Tamarind", "Redwood", "Silverline", "Lodestar"}
var fundNouns = [...]string{"Ridge", "Harbour", "Point", "Crest", "Field", "Bridge", "Stone", "Vale"}
var fundStrategies = [...]string{
	"carry-focused vehicle", "volatility-selling vehicle", "trend-following vehicle", "relative-value vehicle",
	"EM-debt vehicle", "risk-parity vehicle", "event-driven vehicle", "long-short equity vehicle",
	"macro-discretionary vehicle", "merger-arbitrage vehicle",
}

// fundName: HARI / Halcyon Ridge Fund / the carry-focused vehicle.
func fundName(g *gen, used *usedSet) entity {
	desc := fundStrategies[g.uniqueIndex(len(fundStrategies), used)]
	a, n := fundAdjs[g.intn(len(fundAdjs))], fundNouns[g.intn(len(fundNouns))]
	ticker := strings.ToUpper(a[:2]+n[:1]) + string(rune('A'+g.intn(26)))
	full := a + " " + n + " Fund"
	return entity{ticker, full, desc, variants(ticker, full, a+" "+n)}
}

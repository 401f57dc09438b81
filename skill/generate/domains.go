package generate

import (
	"fmt"
	"slices"
	"strings"
)

// Domain is a technical field challenge narratives are set in. A good
// domain has many named entities that can be described in equally neutral
// terms, a rich vocabulary with synonyms and aliases, chains of cause,
// time and cross-reference to reason along, and numbers that serve as
// answers and distractors (paper Appendix B's four suitability criteria).
type Domain struct {
	// Name is the machine name ("biochemistry"); it is the set's domain.
	Name string
	// Field is the OECD FORD major field the domain belongs to.
	Field string
	// Description says what narratives in the domain are about.
	Description string
	// Entities are kinds of named things the candidates are drawn from.
	Entities []string
	// Patterns are the kinds of inference the domain lends itself to.
	Patterns []string
}

// FORD major fields used by the built-in domains. Humanities and the arts
// (field 6) are left out, as in the paper: their texts are interpretive,
// thin on identifiers and numbers, and admit more than one defensible
// answer.
const (
	FieldNatural      = "1. Natural sciences"
	FieldEngineering  = "2. Engineering and technology"
	FieldMedical      = "3. Medical and health sciences"
	FieldAgricultural = "4. Agricultural and veterinary sciences"
	FieldSocial       = "5. Social sciences"
)

// domainTable holds the built-in domains: the paper's five first, then
// ten more chosen against the same four criteria.
var domainTable = []Domain{
	{
		Name: "biochemistry", Field: FieldNatural,
		Description: "enzyme kinetics screens, inhibitor profiling and assay quality control in a metabolic biochemistry lab",
		Entities:    []string{"enzymes and isoforms", "inhibitor compounds", "metabolic intermediates", "reagent lots", "assay plates"},
		Patterns:    []string{"a kinetic shift that survives replication versus one that does not", "which inhibition mechanism the data support", "an artefact traced to reagents or instruments"},
	},
	{
		Name: "cybersecurity", Field: FieldEngineering,
		Description: "incident response, threat intelligence and network forensics in an enterprise security team",
		Entities:    []string{"hosts", "CVE identifiers", "malware families", "threat-actor clusters", "service accounts", "IP ranges"},
		Patterns:    []string{"separating false positives from real intrusions", "tracing lateral movement across hosts", "attributing activity to an actor or to benign automation"},
	},
	{
		Name: "clinical_trials", Field: FieldMedical,
		Description: "efficacy and safety readouts of multi-site drug trials, with interim analyses and data monitoring",
		Entities:    []string{"drug candidates", "trial arms", "patient subgroups", "sites", "biomarkers", "adverse events"},
		Patterns:    []string{"a real efficacy signal versus a confounded one", "attributing an adverse event to the drug or to a co-medication", "a subgroup effect that holds across sites"},
	},
	{
		Name: "food_safety", Field: FieldAgricultural,
		Description: "contaminant screening, microbiological testing and batch traceability at food producers and regulators",
		Entities:    []string{"production batches", "pathogens and serotypes", "chemical residues", "suppliers", "processing lines", "tolerance limits"},
		Patterns:    []string{"tracing a contamination to its source", "a limit exceedance explained by sampling or by the product", "comparing batches across lines and dates"},
	},
	{
		Name: "financial_markets", Field: FieldSocial,
		Description: "market surveillance, macro indicators, rates and credit desks, and fund risk reports",
		Entities:    []string{"currency pairs", "funds", "indices", "bond issues", "counterparties", "economic releases"},
		Patterns:    []string{"a sustained deviation versus noise", "attributing a move to a release or to positioning", "correlation across markets versus coincidence"},
	},
	{
		Name: "materials_science", Field: FieldEngineering,
		Description: "qualification testing of alloys, polymers and composites: fatigue, creep, corrosion and microstructure analysis",
		Entities:    []string{"alloy grades", "heat or melt numbers", "specimens", "test rigs", "coatings", "heat-treatment routes"},
		Patterns:    []string{"a property loss that persists across specimens versus a fixture artefact", "which processing step causes a microstructural defect", "comparing lots against a specification limit"},
	},
	{
		Name: "environmental_monitoring", Field: FieldNatural,
		Description: "air and water quality networks, emission sources and exceedance investigations by an environmental agency",
		Entities:    []string{"monitoring stations", "pollutants", "industrial permit holders", "river reaches", "sampling campaigns", "sensor units"},
		Patterns:    []string{"attributing an exceedance to a source or to weather", "a sensor drift versus a real change", "upstream and downstream comparison over time"},
	},
	{
		Name: "epidemiology", Field: FieldMedical,
		Description: "outbreak investigation by a public health unit: case clusters, exposure sites, strain typing and contact tracing",
		Entities:    []string{"case clusters", "strains and sequence types", "exposure venues", "index cases", "laboratories", "reporting districts"},
		Patterns:    []string{"a common source versus coincident cases", "ordering exposures in time", "linking clusters through typing results"},
	},
	{
		Name: "aviation_maintenance", Field: FieldEngineering,
		Description: "fleet reliability and line maintenance: fault reports, component removals and airworthiness follow-up",
		Entities:    []string{"aircraft registrations", "components and part numbers", "fault codes", "maintenance stations", "work orders", "engine serials"},
		Patterns:    []string{"a recurring defect versus a one-off sensor fault", "which repair actually cleared the fault", "a fleet-wide issue versus a single tail"},
	},
	{
		Name: "power_grid_operations", Field: FieldEngineering,
		Description: "transmission and distribution operations: disturbances, protection relays, outages and post-event analysis",
		Entities:    []string{"substations", "feeders and lines", "relays", "transformers", "generating units", "switching orders"},
		Patterns:    []string{"the initiating fault versus consequential trips", "a protection misoperation versus correct clearing", "load and frequency behaviour over an event timeline"},
	},
	{
		Name: "supply_chain_logistics", Field: FieldSocial,
		Description: "freight, warehousing and inventory control: delays, shrinkage, carrier performance and audits",
		Entities:    []string{"shipments and container numbers", "carriers", "warehouses", "SKUs", "purchase orders", "ports"},
		Patterns:    []string{"a systematic delay versus a one-time disruption", "locating where stock went missing", "comparing carriers over several periods"},
	},
	{
		Name: "veterinary_diagnostics", Field: FieldAgricultural,
		Description: "herd health investigations by a veterinary lab: pathogen testing, vaccine lots and farm biosecurity",
		Entities:    []string{"farms and herds", "pathogens", "vaccine lots", "feed suppliers", "diagnostic assays", "animal cohorts"},
		Patterns:    []string{"infection versus vaccine-induced antibodies", "spread between farms versus a shared input", "a result confirmed by a second assay versus a single positive"},
	},
	{
		Name: "agronomy", Field: FieldAgricultural,
		Description: "field trials of crop varieties and treatments: yields, pest and disease pressure, soil and weather effects",
		Entities:    []string{"cultivars", "trial plots", "fungicides and fertilisers", "pests and pathogens", "seed lots", "weather stations"},
		Patterns:    []string{"a treatment effect that holds across sites and seasons", "yield loss attributed to weather or to disease", "ranking varieties under stated conditions"},
	},
	{
		Name: "seismology", Field: FieldNatural,
		Description: "earthquake and volcano monitoring: event catalogues, station networks, swarms and instrument checks",
		Entities:    []string{"seismic stations", "events and catalogue IDs", "fault segments", "swarms", "instruments", "processing pipelines"},
		Patterns:    []string{"a tectonic signal versus noise or a glitch", "ordering events into a sequence", "relocating an event after reprocessing"},
	},
	{
		Name: "site_reliability", Field: FieldEngineering,
		Description: "production incidents in large software services: deploys, alerts, dependencies, capacity and postmortems",
		Entities:    []string{"services", "deploy IDs and versions", "clusters and regions", "feature flags", "alerts", "on-call teams"},
		Patterns:    []string{"the change that caused an incident versus a coincident one", "a regional versus global failure", "error rates before and after a rollback"},
	},
	{
		Name: "genomics", Field: FieldNatural,
		Description: "sequencing studies and variant interpretation: samples, runs, genes, variants and quality metrics",
		Entities:    []string{"genes", "variants", "samples and libraries", "sequencing runs", "cohorts", "pipelines"},
		Patterns:    []string{"a true variant versus a sequencing artefact", "segregation across related samples", "a batch effect versus a biological difference"},
	},
	{
		Name: "forensic_accounting", Field: FieldSocial,
		Description: "audit and fraud examinations: ledgers, journal entries, vendors, reconciliations and control tests",
		Entities:    []string{"accounts", "vendors", "journal entries", "subsidiaries", "invoices", "reporting periods"},
		Patterns:    []string{"a recurring irregularity versus a timing difference", "tracing funds through intermediaries", "a control failure versus an explained exception"},
	},
	{
		Name: "water_treatment", Field: FieldEngineering,
		Description: "drinking and waste water plants: process upsets, lab results, dosing, distribution and compliance",
		Entities:    []string{"treatment plants", "process units", "wells and reservoirs", "contaminants", "dosing chemicals", "sampling points"},
		Patterns:    []string{"a process cause versus a source-water change", "a sampling error versus a real exceedance", "following a problem downstream through the network"},
	},
}

// Domains returns the built-in domains.
func Domains() []Domain {
	out := make([]Domain, len(domainTable))
	for i, d := range domainTable {
		d.Entities = slices.Clone(d.Entities)
		d.Patterns = slices.Clone(d.Patterns)
		out[i] = d
	}
	return out
}

// DomainNames returns the names of the built-in domains.
func DomainNames() []string {
	out := make([]string, len(domainTable))
	for i, d := range domainTable {
		out[i] = d.Name
	}
	return out
}

// LookupDomain returns the built-in domain with the given name (case and
// dashes do not matter).
func LookupDomain(name string) (Domain, error) {
	n := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(name)), "-", "_")
	for _, d := range Domains() {
		if d.Name == n {
			return d, nil
		}
	}
	return Domain{}, fmt.Errorf("unknown domain %q (known: %s)", name, strings.Join(DomainNames(), ", "))
}

// Package ttbar writes and analyses the input files of seed 000's workflow
// benchmark: ROOT files of simulated ttbar-like events (about 1 600
// particles and 26 kB per event), and a pseudo-analysis that loops over the
// events, fills every particle's pseudorapidity and the reconstructed ttbar
// mass into histograms, and reports its own timings and CPU efficiency.
package ttbar

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"

	"go-hep.org/x/hep/fmom"
	"go-hep.org/x/hep/groot"
	"go-hep.org/x/hep/groot/riofs"
	"go-hep.org/x/hep/groot/rtree"
)

// Tree and branch names of the generated files.
const (
	TreeName = "events"
	// StatusTopDecay marks the decay products of the two top quarks (the b
	// quarks and the W daughters), Pythia's "outgoing particle of the
	// hardest subprocess": the analysis sums them into the ttbar system.
	StatusTopDecay = 23
	// StatusFinal marks final-state particles.
	StatusFinal = 1
)

// Event is one event as stored: per event the particle count, per particle
// the PDG id, the status, the energy, the mass, pt, phi and eta (GeV, rad).
type Event struct {
	N      int32
	PDG    []int32
	Status []int32
	E      []float32
	M      []float32
	Pt     []float32
	Phi    []float32
	Eta    []float32
}

func (e *Event) reset() {
	e.N = 0
	e.PDG, e.Status = e.PDG[:0], e.Status[:0]
	e.E, e.M, e.Pt, e.Phi, e.Eta = e.E[:0], e.M[:0], e.Pt[:0], e.Phi[:0], e.Eta[:0]
}

func (e *Event) add(pdg, status int32, p fmom.P4) {
	e.N++
	e.PDG = append(e.PDG, pdg)
	e.Status = append(e.Status, status)
	e.E = append(e.E, float32(p.E()))
	e.M = append(e.M, float32(p.M()))
	e.Pt = append(e.Pt, float32(p.Pt()))
	e.Phi = append(e.Phi, float32(p.Phi()))
	e.Eta = append(e.Eta, float32(p.Eta()))
}

func (e *Event) writeVars() []rtree.WriteVar {
	return []rtree.WriteVar{
		{Name: "nParticles", Value: &e.N},
		{Name: "pdgId", Value: &e.PDG, Count: "nParticles"},
		{Name: "status", Value: &e.Status, Count: "nParticles"},
		{Name: "E", Value: &e.E, Count: "nParticles"},
		{Name: "m", Value: &e.M, Count: "nParticles"},
		{Name: "pt", Value: &e.Pt, Count: "nParticles"},
		{Name: "phi", Value: &e.Phi, Count: "nParticles"},
		{Name: "eta", Value: &e.Eta, Count: "nParticles"},
	}
}

func (e *Event) readVars() []rtree.ReadVar {
	return []rtree.ReadVar{
		{Name: "nParticles", Value: &e.N},
		{Name: "pdgId", Value: &e.PDG},
		{Name: "status", Value: &e.Status},
		{Name: "E", Value: &e.E},
		{Name: "m", Value: &e.M},
		{Name: "pt", Value: &e.Pt},
		{Name: "phi", Value: &e.Phi},
		{Name: "eta", Value: &e.Eta},
	}
}

// GenConfig configures Generate. Zero fields take the defaults noted.
type GenConfig struct {
	// Events is the number of events. Default 2000 (52 MB); the paper's
	// files had 50 000, 200 000 and 500 000.
	Events int
	// Seed makes the file reproducible: the same seed gives the same
	// events. Default 1.
	Seed uint64
	// Particles is the mean particle count per event. Default 1600.
	Particles int
	// BasketSize is the tree's basket size per branch in bytes. Default
	// 256 KiB, about ROOT's size after its first auto-flush resizing
	// (ROOT starts at 32 kB and grows baskets to the cluster).
	BasketSize int
}

const (
	defaultEvents     = 2000
	defaultParticles  = 1600
	defaultBasketSize = 256 << 10
)

func (c *GenConfig) ensureDefaults() {
	if c.Events == 0 {
		c.Events = defaultEvents
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Particles == 0 {
		c.Particles = defaultParticles
	}
	if c.BasketSize == 0 {
		c.BasketSize = defaultBasketSize
	}
}

// Generate writes cfg.Events events to a new ROOT file at path (zlib level
// 1, ROOT's default compression). The file is written to path+".tmp" and
// renamed, so a complete file at path is never a partial one.
func Generate(path string, cfg GenConfig) (err error) {
	cfg.ensureDefaults()
	if cfg.Events < 0 || cfg.Particles < 20 {
		return fmt.Errorf("ttbar: generate %s: need events >= 0 and particles >= 20, have %d and %d", path, cfg.Events, cfg.Particles)
	}
	tmp := path + ".tmp"
	f, err := groot.Create(tmp, riofs.WithZlib(1))
	if err != nil {
		return fmt.Errorf("ttbar: create %s: %w", tmp, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	var ev Event
	w, err := rtree.NewWriter(f, TreeName, ev.writeVars(),
		rtree.WithZlib(1), rtree.WithBasketSize(cfg.BasketSize),
		rtree.WithTitle("simulated ttbar-like events, pp at 13 TeV (hepcache bench)"))
	if err != nil {
		return fmt.Errorf("ttbar: tree writer %s: %w", tmp, err)
	}
	g := newGenerator(cfg)
	for i := 0; i < cfg.Events; i++ {
		g.event(&ev)
		if _, err := w.Write(); err != nil {
			w.Close()
			return fmt.Errorf("ttbar: write event %d to %s: %w", i, tmp, err)
		}
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("ttbar: close tree in %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("ttbar: close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("ttbar: %w", err)
	}
	return nil
}

// Masses and widths in GeV.
const (
	massTop   = 172.5
	widthTop  = 1.4
	massW     = 80.4
	widthW    = 2.1
	massB     = 4.8
	sqrtS     = 13000.0
	maxEtaGen = 5.5
)

// species is a particle type with its mass and a weight in the soft part of
// the event (the parton shower, hadronisation and decays).
type species struct {
	pdg    int32
	mass   float64
	weight float64
	// charged species come with their antiparticle (pdg negated).
	charged bool
	// status is the Pythia-like status code: 1 final, negative
	// intermediate (decayed or showered).
	status int32
}

// softSpecies approximates the composition of a Pythia ttbar event record:
// final-state photons (from pi0 decays), charged pions and kaons,
// (anti)protons and neutrons, plus the intermediate pi0, rho, eta, K*, and
// shower partons that the record keeps with negative status.
var softSpecies = []species{
	{22, 0, 0.30, false, StatusFinal},
	{211, 0.13957, 0.26, true, StatusFinal},
	{321, 0.49368, 0.035, true, StatusFinal},
	{130, 0.49761, 0.015, false, StatusFinal},
	{2212, 0.93827, 0.02, true, StatusFinal},
	{2112, 0.93957, 0.02, true, StatusFinal},
	{11, 0.000511, 0.004, true, StatusFinal},
	{13, 0.10566, 0.001, true, StatusFinal},
	{111, 0.13498, 0.14, false, -91},
	{113, 0.77526, 0.02, false, -83},
	{221, 0.54786, 0.015, false, -91},
	{323, 0.89166, 0.01, true, -83},
	{21, 0, 0.08, false, -51},
	{2, 0.0022, 0.02, true, -71},
	{1, 0.0047, 0.02, true, -71},
	{3, 0.095, 0.01, true, -72},
}

// generator draws events from a seeded source.
type generator struct {
	rng       *rand.Rand
	particles int
	cum       []float64 // cumulative weights of softSpecies
}

func newGenerator(cfg GenConfig) *generator {
	g := &generator{rng: rand.New(rand.NewPCG(cfg.Seed, 0x7474626172)), particles: cfg.Particles}
	sum := 0.0
	for _, s := range softSpecies {
		sum += s.weight
		g.cum = append(g.cum, sum)
	}
	for i := range g.cum {
		g.cum[i] /= sum
	}
	return g
}

// breitWigner draws a mass from a Breit-Wigner of mass m and width w,
// truncated to m +- 10 w.
func (g *generator) breitWigner(m, w float64) float64 {
	for {
		x := m + w/2*math.Tan(math.Pi*(g.rng.Float64()-0.5))
		if math.Abs(x-m) < 10*w {
			return x
		}
	}
}

// isotropic returns the two daughters' four-momenta of a two-body decay of
// a particle of mass m at rest into masses m1 and m2.
func (g *generator) isotropic(m, m1, m2 float64) (fmom.PxPyPzE, fmom.PxPyPzE) {
	p := math.Sqrt(math.Max(0, (m*m-(m1+m2)*(m1+m2))*(m*m-(m1-m2)*(m1-m2)))) / (2 * m)
	cost := 2*g.rng.Float64() - 1
	sint := math.Sqrt(1 - cost*cost)
	phi := 2 * math.Pi * g.rng.Float64()
	px, py, pz := p*sint*math.Cos(phi), p*sint*math.Sin(phi), p*cost
	return fmom.NewPxPyPzE(px, py, pz, math.Hypot(p, m1)),
		fmom.NewPxPyPzE(-px, -py, -pz, math.Hypot(p, m2))
}

// boostTo boosts the daughter d (given in the parent's rest frame) into the
// frame where the parent has four-momentum parent.
func boostTo(d fmom.PxPyPzE, parent fmom.P4) fmom.PxPyPzE {
	b := fmom.Boost(&d, fmom.BoostOf(parent))
	return fmom.NewPxPyPzE(b.Px(), b.Py(), b.Pz(), b.E())
}

// wDecay returns the W's daughters: quarks (u d-bar or c s-bar, 67 %) or a
// lepton and its neutrino. sign is +1 for the W+.
func (g *generator) wDecay(sign int32) (pdg1, pdg2 int32) {
	u := g.rng.Float64()
	switch {
	case u < 0.335:
		return sign * 2, -sign * 1 // u d-bar
	case u < 0.67:
		return sign * 4, -sign * 3 // c s-bar
	case u < 0.78:
		return -sign * 11, sign * 12 // e+ nu_e
	case u < 0.89:
		return -sign * 13, sign * 14 // mu+ nu_mu
	default:
		return -sign * 15, sign * 16 // tau+ nu_tau
	}
}

func quarkMass(pdg int32) float64 {
	switch abs32(pdg) {
	case 1:
		return 0.0047
	case 2:
		return 0.0022
	case 3:
		return 0.095
	case 4:
		return 1.27
	case 11:
		return 0.000511
	case 13:
		return 0.10566
	case 15:
		return 1.777
	}
	return 0
}

func abs32(v int32) int32 {
	if v < 0 {
		return -v
	}
	return v
}

// event fills ev with one event: the ttbar system and its decays first,
// then the soft particles up to the drawn multiplicity.
func (g *generator) event(ev *Event) {
	ev.reset()
	r := g.rng

	// The ttbar system: invariant mass from threshold with a falling tail
	// (peak near 400 GeV, mean about 500 GeV), small pt, rapidity around 0.
	mt1, mt2 := g.breitWigner(massTop, widthTop), g.breitWigner(massTop, widthTop)
	var mtt float64
	for {
		mtt = mt1 + mt2 + 10 + r.ExpFloat64()*60 + math.Abs(r.NormFloat64())*90
		if mtt < sqrtS {
			break
		}
	}
	ptSys := r.ExpFloat64() * 25
	phiSys := 2 * math.Pi * r.Float64()
	ySys := r.NormFloat64() * 0.9
	mtSys := math.Hypot(mtt, ptSys)
	sys := fmom.NewPxPyPzE(ptSys*math.Cos(phiSys), ptSys*math.Sin(phiSys), mtSys*math.Sinh(ySys), mtSys*math.Cosh(ySys))

	t1, t2 := g.isotropic(mtt, mt1, mt2)
	tops := [2]fmom.PxPyPzE{boostTo(t1, &sys), boostTo(t2, &sys)}
	for i, top := range tops {
		sign := int32(1 - 2*i) // top, then anti-top
		ev.add(sign*6, -22, &top)
		mw := g.breitWigner(massW, widthW)
		for mw >= top.M()-massB {
			mw = g.breitWigner(massW, widthW)
		}
		b, w := g.isotropic(top.M(), massB, mw)
		b, w = boostTo(b, &top), boostTo(w, &top)
		ev.add(sign*24, -22, &w)
		ev.add(sign*5, StatusTopDecay, &b)
		p1, p2 := g.wDecay(sign)
		d1, d2 := g.isotropic(w.M(), quarkMass(p1), quarkMass(p2))
		d1, d2 = boostTo(d1, &w), boostTo(d2, &w)
		ev.add(p1, StatusTopDecay, &d1)
		ev.add(p2, StatusTopDecay, &d2)
	}

	// The soft part: multiplicity around the mean, exponential-like pt
	// with a harder tail, flat-ish pseudorapidity within the detector
	// acceptance and beyond.
	n := int(float64(g.particles) * (1 + 0.18*r.NormFloat64()))
	n = max(n, int(ev.N)+10)
	for int(ev.N) < n {
		s := softSpecies[g.pick()]
		pdg := s.pdg
		if s.charged && r.IntN(2) == 1 {
			pdg = -pdg
		}
		pt := 0.35 * (r.ExpFloat64() + r.ExpFloat64())
		if r.Float64() < 0.03 {
			pt += r.ExpFloat64() * 8
		}
		eta := r.NormFloat64() * 2.6
		if math.Abs(eta) > maxEtaGen {
			eta = math.Copysign(maxEtaGen-r.Float64(), eta)
		}
		phi := math.Pi * (2*r.Float64() - 1)
		p := fmom.NewPtEtaPhiM(pt, eta, phi, s.mass)
		ev.add(pdg, s.status, &p)
	}
}

func (g *generator) pick() int {
	u := g.rng.Float64()
	for i, c := range g.cum {
		if u < c {
			return i
		}
	}
	return len(g.cum) - 1
}

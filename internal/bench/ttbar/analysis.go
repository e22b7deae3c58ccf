package ttbar

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"syscall"
	"time"

	"go-hep.org/x/hep/fmom"
	"go-hep.org/x/hep/groot"
	"go-hep.org/x/hep/groot/rhist"
	"go-hep.org/x/hep/groot/riofs"
	"go-hep.org/x/hep/groot/rtree"
	"go-hep.org/x/hep/hbook"
)

// JobConfig configures one pseudo-analysis job.
type JobConfig struct {
	// Input is a local path or a root://host:port//path URL. Required.
	Input string
	// Events is how many events to process from the start of the file;
	// zero or more than the file holds means all.
	Events int64
	// HistOut is the ROOT file the histograms are written to; empty
	// skips writing.
	HistOut string
	// Work repeats the per-particle four-vector arithmetic Work times per
	// event (default 1), to emulate slower analysis code: the paper's
	// PyROOT loop spent about 15 ms per event, this Go loop well under 1.
	Work int
	// Prefetch is the number of baskets per branch read ahead (groot's
	// TTreeCache-like concurrent read-ahead). Default 2, groot's default;
	// negative means 0 (every basket read when first needed).
	Prefetch int
	// ReadAhead, when positive, makes remote reads fetch aligned blocks of
	// this many bytes and keep the last few (a client-side read-ahead like
	// XrdCl's); zero reads exactly what groot asks for.
	ReadAhead int
}

// Timings is what a job reports, as JSON.
type Timings struct {
	Input     string `json:"input"`
	Events    int64  `json:"events"`
	Particles int64  `json:"particles"`
	// OpenSeconds is the time to open the file and the tree.
	OpenSeconds float64 `json:"open_s"`
	// FirstEventSeconds is from the start of the job to the first event
	// delivered by the tree reader.
	FirstEventSeconds float64 `json:"first_event_s"`
	// LoopSeconds is the event loop alone.
	LoopSeconds float64 `json:"loop_s"`
	// WallSeconds is the whole job: open, loop, histograms written.
	WallSeconds float64 `json:"wall_s"`
	// CPUSeconds is the process's user+system time over the job
	// (getrusage), CPUEfficiency = CPUSeconds / WallSeconds.
	CPUSeconds    float64 `json:"cpu_s"`
	CPUEfficiency float64 `json:"cpu_efficiency"`
	// BytesRead is what the job read from the input (local or remote).
	BytesRead int64 `json:"bytes_read"`
	// Reads is the number of read calls that reached the input.
	Reads int64 `json:"reads"`
	// MeanTTbarMass and EtaEntries summarise the histograms, so a result
	// can be checked against another job's on the same events.
	MeanTTbarMass float64 `json:"mean_ttbar_mass_gev"`
	EtaEntries    int64   `json:"eta_entries"`
	// EtaBins and MttBins are the histograms' entries per bin, underflow
	// first and overflow last: equal bins mean equal physics, whichever
	// job (go-hep or uproot) and access path produced them.
	EtaBins []int64 `json:"eta_bins"`
	MttBins []int64 `json:"mtt_bins"`
	// The uproot job also reports its import time, the chunks its
	// requests asked for (a vector read asks for several) and its
	// libraries.
	ImportSeconds float64 `json:"import_s,omitempty"`
	Chunks        int64   `json:"chunks,omitempty"`
	Client        string  `json:"client,omitempty"`
}

// binEntries returns h's entries per bin with underflow first and overflow
// last.
func binEntries(h *hbook.H1D) []int64 {
	out := []int64{h.Binning.Underflow().Entries()}
	for _, b := range h.Binning.Bins {
		out = append(out, b.Entries())
	}
	return append(out, h.Binning.Overflow().Entries())
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Run runs the pseudo-analysis of seed 000: open the input, loop over the
// events, fill every particle's pseudorapidity into one histogram and the
// mass of the summed top decay products (the ttbar system) into another,
// and write both to cfg.HistOut.
func Run(ctx context.Context, cfg JobConfig) (*Timings, error) {
	if cfg.Input == "" {
		return nil, errors.New("ttbar: job needs an input file or root:// URL")
	}
	if cfg.Work <= 0 {
		cfg.Work = 1
	}
	start, cpu0 := time.Now(), cpuTime()
	in, err := openInput(ctx, cfg.Input, cfg.ReadAhead)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	f, err := riofs.NewReader(in)
	if err != nil {
		return nil, fmt.Errorf("ttbar: open %s: %w", cfg.Input, err)
	}
	defer f.Close()
	obj, err := riofs.Dir(f).Get(TreeName)
	if err != nil {
		return nil, fmt.Errorf("ttbar: %s: %w", cfg.Input, err)
	}
	tree, ok := obj.(rtree.Tree)
	if !ok {
		return nil, fmt.Errorf("ttbar: %s: %q is a %T, not a tree", cfg.Input, TreeName, obj)
	}
	n := tree.Entries()
	if cfg.Events > 0 && cfg.Events < n {
		n = cfg.Events
	}
	var ev Event
	opts := []rtree.ReadOption{rtree.WithRange(0, n)}
	switch {
	case cfg.Prefetch > 0:
		opts = append(opts, rtree.WithPrefetchBaskets(cfg.Prefetch))
	case cfg.Prefetch < 0:
		opts = append(opts, rtree.WithPrefetchBaskets(0))
	}
	rd, err := rtree.NewReader(tree, ev.readVars(), opts...)
	if err != nil {
		return nil, fmt.Errorf("ttbar: tree reader on %s: %w", cfg.Input, err)
	}
	defer rd.Close()
	opened := time.Now()

	hEta := hbook.NewH1D(120, -6, 6)
	hEta.Annotation()["name"] = "eta"
	hMtt := hbook.NewH1D(120, 0, 1200)
	hMtt.Annotation()["name"] = "mtt"
	var (
		first     time.Duration
		particles int64
		mttSum    float64
		mttN      int
		sink      float64 // keeps the extra Work passes from being optimised away
	)
	err = rd.Read(func(rctx rtree.RCtx) error {
		if rctx.Entry == 0 {
			first = time.Since(start)
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		np := int(ev.N)
		particles += int64(np)
		for i := 0; i < np; i++ {
			hEta.Fill(float64(ev.Eta[i]), 1)
		}
		var sys fmom.PxPyPzE
		for w := 0; w < cfg.Work; w++ {
			sys = fmom.PxPyPzE{}
			for i := 0; i < np; i++ {
				if abs32(ev.Status[i]) != StatusTopDecay {
					continue
				}
				p := fmom.NewPtEtaPhiM(float64(ev.Pt[i]), float64(ev.Eta[i]), float64(ev.Phi[i]), float64(ev.M[i]))
				fmom.IAdd(&sys, &p)
			}
			if w+1 < cfg.Work {
				// Extra passes touch every particle, as a heavier
				// analysis would.
				for i := 0; i < np; i++ {
					p := fmom.NewPtEtaPhiM(float64(ev.Pt[i]), float64(ev.Eta[i]), float64(ev.Phi[i]), float64(ev.M[i]))
					sink += p.Rapidity()
				}
			}
		}
		if m := sys.M(); !math.IsNaN(m) && m > 0 {
			hMtt.Fill(m, 1)
			mttSum += m
			mttN++
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ttbar: event loop over %s: %w", cfg.Input, err)
	}
	looped := time.Now()
	_ = sink
	if cfg.HistOut != "" {
		if err := writeHists(cfg.HistOut, hEta, hMtt); err != nil {
			return nil, err
		}
	}
	wall, cpu := time.Since(start), cpuTime()-cpu0
	t := &Timings{
		Input:             cfg.Input,
		Events:            n,
		Particles:         particles,
		OpenSeconds:       opened.Sub(start).Seconds(),
		FirstEventSeconds: first.Seconds(),
		LoopSeconds:       looped.Sub(opened).Seconds(),
		WallSeconds:       wall.Seconds(),
		CPUSeconds:        cpu.Seconds(),
		CPUEfficiency:     cpu.Seconds() / wall.Seconds(),
		BytesRead:         in.bytes.Load(),
		Reads:             in.reads.Load(),
		EtaEntries:        int64(hEta.Entries()),
		EtaBins:           binEntries(hEta),
		MttBins:           binEntries(hMtt),
		Client:            "go-hep groot",
	}
	if mttN > 0 {
		t.MeanTTbarMass = mttSum / float64(mttN)
	}
	return t, nil
}

func writeHists(path string, hs ...*hbook.H1D) error {
	f, err := groot.Create(path)
	if err != nil {
		return fmt.Errorf("ttbar: create %s: %w", path, err)
	}
	for _, h := range hs {
		name := h.Name()
		if err := f.Put(name, rhist.NewH1DFrom(h)); err != nil {
			f.Close()
			return fmt.Errorf("ttbar: write histogram %s to %s: %w", name, path, err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("ttbar: close %s: %w", path, err)
	}
	return nil
}

// IsRemote tells whether input names a root:// URL.
func IsRemote(input string) bool {
	return strings.HasPrefix(input, "root://") || strings.HasPrefix(input, "xroot://")
}

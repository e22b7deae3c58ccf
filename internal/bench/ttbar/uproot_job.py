"""The pseudo-analysis of hepcache's workflow benchmark written with uproot.

Embedded in the hepcache binary (internal/bench/ttbar) and run with the venv
interpreter ($HEPCACHE_PYTHON). Remote inputs are root:// URLs, which uproot
reads through fsspec-xrootd, that is through XrdCl: its vector reads, its
connection handling and, with XRD_PLUGIN/XROOT_PROXY set, the proxy plugin.

  ttbar --input URL --events N [--work W] [--hist OUT] [--step S]
      the same analysis as the go-hep job (ttbar.Run): every particle's
      pseudorapidity and the mass of the summed top decay products filled
      into histograms binned exactly as go-hep's hbook bins them, so that the
      two jobs' bin contents can be compared for equality.
  dump --input URL [--input URL...]
      read every key of each file (every branch of every TTree) and print a
      digest per file: the real-file run compares them across access paths.

Prints one JSON object on stdout. Times are seconds; cpu_s is the whole
process's user+system time (imports included), as a batch system counts it.
"""

import time

T_START = time.monotonic()

import argparse
import hashlib
import json
import resource
import sys

import awkward as ak
import numpy as np
import uproot

T_IMPORTED = time.monotonic()

TREE = "events"
STATUS_TOP_DECAY = 23
BRANCHES = ["nParticles", "pdgId", "status", "E", "m", "pt", "phi", "eta"]


def cpu_seconds():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def h1_counts(values, nbins, lo, hi):
    """Bin values as go-hep's hbook.H1D does: [underflow, bins..., overflow].

    hbook's bin i is [lo + i*w, lo + (i+1)*w) with w = (hi-lo)/n, found by a
    binary search on the upper edges; the same float64 arithmetic here gives
    the same bin for every value, edges included.
    """
    v = np.asarray(values, dtype=np.float64)
    width = (hi - lo) / nbins
    upper = lo + np.arange(1, nbins + 1, dtype=np.float64) * width
    idx = np.searchsorted(upper, v, side="right")
    under = v < lo
    over = ~under & ((v >= hi) | (idx >= nbins))  # NaN lands here, as in hbook
    inside = ~under & ~over
    counts = np.bincount(idx[inside], minlength=nbins)
    return [int(under.sum())] + [int(c) for c in counts] + [int(over.sum())]


def four_momenta(pt, eta, phi, m):
    """go-hep fmom.PtEtaPhiM's Px, Py, Pz and E in float64."""
    pt, eta, phi, m = (ak.values_astype(a, np.float64) for a in (pt, eta, phi, m))
    px = pt * np.cos(phi)
    py = pt * np.sin(phi)
    pz = pt * np.sinh(eta)
    sign = ak.where(pt < 0, -1.0, 1.0)
    e = sign * np.sqrt(pt * pt + pz * pz + m * m)
    return px, py, pz, e


def ttbar(args):
    t0 = time.monotonic()
    f = uproot.open(args.input)
    tree = f[TREE]
    n = tree.num_entries
    if 0 < args.events < n:
        n = args.events
    t_open = time.monotonic()

    eta_values, mtt_values = [], []
    particles = 0
    first = None
    sink = 0.0
    # Entries per batch, not uproot's default "100 MB": sizing a batch in
    # bytes reads basket keys with numpy integers as offsets, which the
    # XRootD 6 bindings refuse through fsspec-xrootd 0.5 ("integer argument
    # expected for offset"). 2000 events are about 100 MB uncompressed.
    step = args.step if args.step > 0 else 2000
    for batch in tree.iterate(BRANCHES, entry_stop=n, step_size=step, library="ak"):
        if first is None:
            first = time.monotonic() - t0
        particles += int(ak.sum(batch["nParticles"]))
        eta_values.append(ak.to_numpy(ak.flatten(batch["eta"])))
        top = abs(batch["status"]) == STATUS_TOP_DECAY
        for w in range(args.work):
            px, py, pz, e = four_momenta(batch["pt"][top], batch["eta"][top], batch["phi"][top], batch["m"][top])
            spx, spy, spz, se = (ak.to_numpy(ak.sum(a, axis=1)) for a in (px, py, pz, e))
            if w + 1 < args.work:
                # Extra passes touch every particle, as the go-hep job's do.
                qx, qy, qz, qe = four_momenta(batch["pt"], batch["eta"], batch["phi"], batch["m"])
                sink += float(ak.sum(0.5 * np.log((qe + qz) / (qe - qz))))
        m2 = se * se - (spx * spx + spy * spy + spz * spz)
        mass = np.where(m2 < 0, -np.sqrt(np.abs(m2)), np.sqrt(np.abs(m2)))
        mtt_values.append(mass[~np.isnan(mass) & (mass > 0)])
    t_loop = time.monotonic()

    eta = np.concatenate(eta_values) if eta_values else np.zeros(0)
    mtt = np.concatenate(mtt_values) if mtt_values else np.zeros(0)
    eta_bins = h1_counts(eta, 120, -6.0, 6.0)
    mtt_bins = h1_counts(mtt, 120, 0.0, 1200.0)
    if args.hist:
        with uproot.recreate(args.hist) as out:
            for name, counts, lo, hi in (("eta", eta_bins, -6.0, 6.0), ("mtt", mtt_bins, 0.0, 1200.0)):
                out[name] = (np.asarray(counts[1:-1], dtype=np.float64), np.linspace(lo, hi, 121))
    src = f.file.source
    f.close()
    wall = time.monotonic() - t0
    return {
        "input": args.input,
        "events": int(n),
        "particles": particles,
        "import_s": T_IMPORTED - T_START,
        "open_s": t_open - t0,
        "first_event_s": first if first is not None else 0.0,
        "loop_s": t_loop - t_open,
        "wall_s": wall,
        "cpu_s": cpu_seconds(),
        "cpu_efficiency": cpu_seconds() / (time.monotonic() - T_START),
        "bytes_read": int(src.num_requested_bytes),
        "reads": int(src.num_requests),
        "chunks": int(src.num_requested_chunks),
        "mean_ttbar_mass_gev": float(mtt.mean()) if len(mtt) else 0.0,
        "eta_entries": int(len(eta)),
        "eta_bins": eta_bins,
        "mtt_bins": mtt_bins,
        "client": "uproot " + uproot.__version__ + ", awkward " + ak.__version__,
    }


def digest_array(arr):
    h = hashlib.sha256()
    form, length, buffers = ak.to_buffers(ak.to_packed(arr))
    h.update(form.to_json().encode())
    h.update(str(length).encode())
    for k in sorted(buffers):
        h.update(k.encode())
        h.update(np.ascontiguousarray(buffers[k]).tobytes())
    return h.hexdigest()[:16]


def dump_one(url):
    """Reads every key of one file: TTree branches as arrays, other objects
    as their uncompressed bytes, each digested on its own (so that a branch
    uproot does not read reproducibly can be told apart). A failure is a
    digest too ("error" and its type), so a file uproot cannot fully read
    still compares across access paths."""
    digests = {}
    failures = []

    def fail(what, err):
        digests[what] = "error " + type(err).__name__
        failures.append(what + ": " + type(err).__name__)

    trees = branches = 0
    t0 = time.monotonic()
    with uproot.open(url) as f:
        for key in sorted(f.keys(recursive=True, cycle=True)):
            try:
                obj = f[key]
            except Exception as err:
                fail(key, err)
                continue
            if isinstance(obj, uproot.behaviors.TBranch.HasBranches):
                trees += 1
                for name in obj.keys(recursive=True):
                    try:
                        digests[key + "/" + name] = digest_array(obj[name].array(library="ak"))
                        branches += 1
                    except Exception as err:
                        fail(key + "/" + name, err)
            elif isinstance(obj, uproot.reading.ReadOnlyDirectory):
                continue
            else:
                raw = f.key(key).get_uncompressed_chunk_cursor()[0].raw_data.tobytes()
                digests[key] = hashlib.sha256(raw).hexdigest()[:16]
        src = f.file.source
        size = f.file.source.num_bytes
    h = hashlib.sha256()
    for k in sorted(digests):
        h.update((k + "=" + digests[k] + "\n").encode())
    return {
        "input": url,
        "size": int(size) if size is not None else 0,
        "trees": trees,
        "branches": branches,
        "failed": len(failures),
        "failures": failures,
        "keys": digests,
        "sha256": h.hexdigest(),
        "seconds": time.monotonic() - t0,
        "bytes_read": int(src.num_requested_bytes),
        "reads": int(src.num_requests),
        "chunks": int(src.num_requested_chunks),
    }


def dump(args):
    # Some branches of real files make uproot ask for absurd amounts of
    # memory (24 GB seen with go-hep's test files): bound the address
    # space so that this is a MemoryError of that branch, part of the
    # digest like any other failure, not the machine's OOM killer.
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = 3 << 30
    if hard == resource.RLIM_INFINITY or hard > limit:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    t0 = time.monotonic()
    files = []
    for url in args.input:
        try:
            files.append(dump_one(url))
        except Exception as err:
            # Not a file uproot opens at all: still a result to compare.
            files.append({"input": url, "error": type(err).__name__ + ": " + str(err).splitlines()[0][:200]})
    return {"files": files, "wall_s": time.monotonic() - t0, "cpu_s": cpu_seconds()}


def main():
    p = argparse.ArgumentParser(prog="uproot_job")
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("ttbar")
    t.add_argument("--input", required=True)
    t.add_argument("--events", type=int, default=0)
    t.add_argument("--work", type=int, default=1)
    t.add_argument("--hist", default="")
    t.add_argument("--step", type=int, default=0, help="entries per batch (0: 2000, about uproot's default of 100 MB)")
    d = sub.add_parser("dump")
    d.add_argument("--input", action="append", required=True)
    args = p.parse_args()
    if args.cmd == "ttbar":
        args.work = max(args.work, 1)
        out = ttbar(args)
    else:
        out = dump(args)
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

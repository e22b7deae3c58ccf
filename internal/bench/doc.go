// Package bench holds the benchmarks that `hepcache bench` runs: each starts
// real servers on loopback (a C++ xrootd origin, Debian's XCache 5.5.3 as
// the anchor, hepcache itself), drives them with the real clients, and
// reports ratios against the anchor measured in the same run.
package bench

// Package catalog is the catalogue of a cache's files: what each holds on
// disk, in least-recently-used order, with quotas, pins, per-directory
// statistics and the victims purge takes; loaded in the background at
// start-up. It ranks files and counts bytes; each file's sidecar stays the
// truth of what the file holds.
//
// # Why
//
// A node of 100 TB holds millions of files, and everything the catalogue
// costs is paid per file: memory while the cache runs, time at each start.
// The index it replaces held a map of keys to pointers to items with two
// strings, a time.Time and six pointers (about 330 bytes a file, 10^7
// objects for the collector to mark), and was rebuilt by reading every
// sidecar before the cache served (200,000 files: first hit 7.4 s after
// the start; 10^7 would be many minutes). Pebble keeps its manifest apart
// from its block cache, Varnish's MSE and Traffic Server their directories
// in compact structures persisted apart from the data: so does this
// package, apart from the cache's per-file state and read path.
//
// # Pieces
//
//   - Items (catalog.go): a 64-byte struct holding no pointer, in pages of
//     4096, linked into the LRU list and their quota's list by int32 slot
//     numbers; last access in seconds, the origin as an interned number,
//     the path as a reference into the names arena. The collector never
//     scans them.
//   - Names (names.go): the paths in 64 KiB chunks, each record headed by
//     its slot and length; a chunk mostly freed is evacuated a couple of
//     chunks per removal, so dead names hold at most about a quarter of
//     the arena.
//   - The table (table.go): open addressing over uint64 entries (a key's
//     32-bit hash and its slot), linear probing, backward-shift deletion.
//   - Loading (load.go, snapshot.go, walk.go): a snapshot loads at the
//     speed of a sequential read. One written at a clean shutdown is exact
//     and marked used at the next start; one written while the cache ran
//     (every 10 minutes), or used since, is an approximation for a start
//     after a crash. Then a walk of the sidecar and data trees, side by
//     side, adds what the snapshot lacks, forgets what is gone, reads
//     again what an approximation missed (sidecars written since) and
//     removes data files left without a sidecar. Without a snapshot the
//     walk reads every sidecar, and the catalogue is complete only when it
//     ends. Whatever the cache does meanwhile (opens, removals, a disk
//     taken out) is recorded and never undone by the load.
//
// # Measured
//
// With the paths of `hepcache bench files` (23 bytes), 104 to 115 bytes a
// file by the catalogue's own count, which TestMemoryAccounting checks
// against the heap (within 10 %); each byte of path adds one. At 10^6
// files (BenchmarkCatalog): a snapshot of 33 bytes a file written in 110
// ns a file and loaded in 400 ns a file (10^7 files: 4 s and 330 MB read,
// while the cache serves). At 187,499 files on this VM: the snapshot
// loaded in 56-99 ms, the walk that checks it 0.45 s (1.8 s after a crash,
// a stat per sidecar), every sidecar read 10-14 s.
//
// # Risks
//
// Purge must not rank files it has not loaded: it waits for the catalogue
// (without a snapshot, the walk of a node of 10^7 files takes many
// minutes; a disk filling meanwhile turns writes into reads past the
// cache). After a crash it ranks by an approximation until the walk has
// corrected it: a file's last access may be up to 10 minutes old, its
// bytes those of the snapshot. Files a snapshot has and the trees lost
// are evicted harmlessly (nothing to remove) until the walk forgets them;
// last access is kept to the second, so files used in the same second
// rank in any order among themselves.
package catalog

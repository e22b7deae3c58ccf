// Package blockstore keeps the cache's block bytes in memory it manages
// itself and moves them to and from the data files with direct I/O, so that
// the kernel's page cache is not on the cache's data path.
//
// # Why
//
// On a VM whose host takes freed pages back (cloud VMs, Kubernetes nodes),
// a buffered write into fresh pages cost 1.97 CPU-s per GiB here and an
// O_DIRECT write 0.09; a buffered read of an uncached file 1.28, an O_DIRECT
// read 0.09. The page cache also double-caches every byte and lets one-time
// reads evict hot data. High-performance caches (Apache Traffic Server,
// Varnish's MSE, ScyllaDB) manage their own memory for the same reasons.
//
// # Pieces
//
//   - An arena (arena.go): one mapping of Size bytes made at start-up, cut
//     into slots of one block each, aligned for direct I/O (and on a huge
//     page boundary, with transparent huge pages asked for), outside the Go
//     heap. A slot's pages are touched only when first used, so a process's
//     memory grows with what it holds; SetLimit hands slots' memory back to
//     the kernel when the node needs it (the cache watches the node's
//     memory pressure) and lets them take it again later.
//   - A RAM block cache (store.go) in those slots: blocks being filled from
//     an origin, and blocks recently filled or read back from disk. While a
//     slot is free a block takes it; once the arena is full, S3-FIFO
//     decides what goes: a block enters a small probation queue and moves
//     to the main queue only when read again, so a one-time scan of a
//     large file evicts from probation instead of what is hot.
//   - Data files (file.go) opened with O_DIRECT: whole blocks are written
//     from their slots and read back into slots without the page cache; a
//     file system that refuses O_DIRECT is used with buffered I/O.
//   - Checks: a block read from disk is compared with its recorded CRC32C
//     before the caller gets it; a mismatch is an error (ErrCorrupt), never
//     bytes.
//
// The store knows blocks by Key (a file copy's id and a block index) and
// nothing of origins, protocols or sidecars: the cache decides, the store
// holds and moves bytes.
package blockstore

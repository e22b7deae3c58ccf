// Package cache is hepcache's block cache: it serves file ranges from local
// disk and fetches what is missing from the origin, block by block.
//
// # Layout
//
// A cached file is a sparse data file under Dir/data/<origin>/<path> plus a
// sidecar under Dir/meta/<origin>/<path>.hcinfo (package sidecar): block
// size, file size, origin identity (mtime, ETag), the bitmap of durable
// blocks, checksums and access history. The origin is part of the path, so the
// same path from two sites is two entries, and a default-origin request and a
// forwarded request for the same site share one.
//
// # Catalogue
//
// What every cached file holds, in least-recently-used order, with quotas,
// pins and per-directory statistics, is package catalog's; purge takes its
// victims there. At start-up it loads in the background (from the snapshot
// the last clean shutdown wrote, after a crash the last one written while
// the cache ran, else from every sidecar) and the cache serves at once: an open finds its file by its sidecar's path, as always,
// and with several data disks asks them which holds the data file (load.go).
// Purge waits for the catalogue to be complete. The walk that follows the
// load removes the data files a crash left without a sidecar.
//
// # Durability
//
// A block is written with pwrite as soon as its bytes arrive and is readable
// from then on (it is in the page cache). Its bit in the sidecar is set only
// after the data file has been synced, by a periodic syncer or at last close,
// and the sidecar is replaced atomically (write, fsync, rename). After a crash
// a block whose bit is not set is fetched again: the cache never serves bytes
// that might not have reached the disk.
//
// # Fetching
//
// One entry per open file is shared by every client of that file. A missing
// block has at most one fetch in flight (entry.fetches), however many clients
// wait for it. A fetch splits the block into pieces (PieceSize) that are read
// from the origin concurrently, each written to disk and announced as soon as
// it lands, so a reader streams the piece it needs without waiting for the
// whole block (XCache completes a read only when whole blocks have arrived).
// If a fetch fails, the waiters retry it once themselves (the turn passes to
// a waiter) before failing. Bytes in flight from origins are bounded by a
// memory budget shared by all files, with a reserve that prefetch may not use,
// so demand reads are never starved by read-ahead and memory stays flat as
// clients are added.
//
// # Prefetch and close
//
// While a file is open, up to Prefetch blocks after the furthest block read
// are fetched in the background, wrapping to the start, so a file that stays
// open is completed. When the last client closes, prefetch stops and the
// partial file stays; the next open resumes it (seed 000's behaviour), unless
// CompleteAfterClose keeps fetching until the file is complete.
//
// # Failures
//
// If writing a piece to disk fails (ENOSPC, EIO) the block is not marked, the
// waiting readers read their range straight from the origin (counted as
// bypass) and the client never sees the disk error.
package cache

package cache

import (
	"sync/atomic"
	"time"
)

// Stats are the cache's counters, safe to read at any time.
type Stats struct {
	// Opens by outcome: a hit is an open of a complete file, a partial hit of
	// a file with some blocks, a miss of a file with none.
	Hits, PartialHits, Misses atomic.Int64
	// LocalRedirects counts opens answered with a redirect to the client's
	// own copy of a complete file (Config.LocalRedirect): the client reads
	// it without the cache, so these opens are in no other counter.
	LocalRedirects atomic.Int64
	// OpenErrors counts opens that failed.
	OpenErrors atomic.Int64
	// ForeignWritable counts cached copies dropped because another user
	// could write their data file or sidecar.
	ForeignWritable atomic.Int64
	// Bytes served to clients by where they came from.
	BytesHit, BytesMissed, BytesBypassed atomic.Int64
	// BytesFetched counts bytes read from origins into the cache, of which
	// PrefetchBytes were read ahead of any client.
	BytesFetched, PrefetchBytes atomic.Int64
	// BlocksFetched counts completed block fetches.
	BlocksFetched atomic.Int64
	// CoalescedWaits counts reads that waited on a fetch another read started.
	CoalescedWaits atomic.Int64
	// FetchErrors counts failed block fetches; WriteErrors failed disk writes
	// (each turns its readers into bypass reads).
	FetchErrors, WriteErrors atomic.Int64
	// DirectWrites and BufferedWrites count blocks written to disk with
	// and without direct I/O (a file system that refuses O_DIRECT).
	DirectWrites, BufferedWrites atomic.Int64
	// SyncErrors counts failed syncs or sidecar writes.
	SyncErrors atomic.Int64
	// BlocksChecked counts blocks read back from disk into RAM and found
	// equal to their recorded CRC32C; BlocksCorrupt those that were not
	// (dropped and fetched again, never served).
	BlocksChecked, BlocksCorrupt atomic.Int64
	// RAMHandBacks counts the times memory pressure made the RAM cache
	// hand memory back to the node (pressure.go).
	RAMHandBacks atomic.Int64
	// LinksRefused counts symbolic links found in the cache directory
	// (never followed).
	LinksRefused atomic.Int64
	// PinsRefused counts files in pinned namespaces left unpinned because
	// pinned files held Config.PinShare of the capacity.
	PinsRefused atomic.Int64
	// DisksFailed counts data disks taken out of service.
	DisksFailed atomic.Int64
	// OpenFiles is the number of files with at least one client.
	OpenFiles atomic.Int64
	// Listings is the number of directory listings in progress,
	// ListingsWaiting of those waiting for one of Config.MaxListings.
	Listings, ListingsWaiting atomic.Int64
	// Evictions and EvictedBytes count files removed by purge or Evict;
	// PurgeRuns counts purges that had something to do (counted when they
	// end); LastPurgeNanos and LastPurgeFiles describe the latest one, of
	// which LastPurgeSelectNanos went to choosing the victims (the rest to
	// deleting them).
	Evictions, EvictedBytes, PurgeRuns                   atomic.Int64
	LastPurgeNanos, LastPurgeFiles, LastPurgeSelectNanos atomic.Int64
	// ChecksumFailures counts complete files whose checksum differed from
	// the origin's (the cached copy is dropped).
	ChecksumFailures atomic.Int64
	// Revalidations counts cached copies of mutable paths dropped because
	// the origin's file changed.
	Revalidations atomic.Int64
	// DigestsComputed counts complete files whose md5, sha1, sha256 and
	// crc32 were computed from the cached bytes (digest.go).
	DigestsComputed atomic.Int64
	// OpensShed counts opens refused as busy because the fetches clients
	// wait for were queued beyond Config.ShedAfter (shed.go).
	OpensShed atomic.Int64
	// FDShortages counts opens of a data file or sidecar that met the
	// descriptor limit (EMFILE) and made lingering files give theirs
	// back (descriptors.go).
	FDShortages atomic.Int64
}

// AccessRecord describes one access from open to last close; it is the
// access-log line (docs/access-log.md).
type AccessRecord struct {
	Time          time.Time `json:"time"`
	OpenTime      time.Time `json:"open_time"`
	Path          string    `json:"path"`
	Origin        string    `json:"origin"`
	Size          int64     `json:"size"`
	BytesRead     int64     `json:"bytes_read"`
	BytesHit      int64     `json:"bytes_hit"`
	BytesMissed   int64     `json:"bytes_missed"`
	BytesBypassed int64     `json:"bytes_bypassed"`
	DurationS     float64   `json:"duration_s"`
	Client        string    `json:"client"`
	User          string    `json:"user"`
	Protocol      string    `json:"protocol"`
	Status        string    `json:"status"`
	// BlockSize and BlocksDone (blocks present at close) are for the
	// monitoring g-stream, not the access log.
	BlockSize  int64 `json:"-"`
	BlocksDone int   `json:"-"`
}

package cache

import (
	"fmt"
	"syscall"

	"github.com/hepcache/hepcache/origin"
)

// A partial cached copy can only be completed from the version of the file
// it came from. Whenever the origin file is opened for a copy's missing
// blocks, its size, modification time and ETag are compared with the
// sidecar's; when the file at the origin is another one, or a complete
// copy fails the origin's checksum, the entry is spoiled: the copy is
// forgotten at once (sidecar and data file removed, before any byte of the
// new version is stored), every later read through the entry fails with an
// I/O error, so no reader gets a mix of two versions with a success code,
// and the next open starts a fresh copy of the new version.
//
// What cannot be detected: a replacement with the same size, the same
// modification time (to the second) and no ETag, when the origin offers no
// checksum (or verify_checksum is none) — then only a complete copy's
// checksum comparison could tell, and it has nothing to compare with. With
// a checksum, such a rewrite is caught once the copy is complete; in a
// mutable namespace the read that completed it waits for that (deliver.go).

// errChanged is the reason reads of a spoiled entry fail: an I/O error for
// the client (kXR_IOError, HTTP 500), who may open the file again.
var errChanged = fmt.Errorf("the file changed at the origin while it was cached; open it again: %w", syscall.EIO)

// versionDiffers compares what the origin's open returned with the
// version the cached blocks came from; it returns what differs, or "".
func (e *entry) versionDiffers(fi origin.FileInfo) string {
	switch {
	case fi.Size != e.info.Size:
		return fmt.Sprintf("size %d, cached copy %d", fi.Size, e.info.Size)
	case e.unconfirmed:
		// info.ModTime is when XCache cached the copy: the file must not
		// have changed since.
		if fi.ModTime.After(e.info.ModTime) {
			return fmt.Sprintf("modified at %s, after the adopted copy was cached at %s", fi.ModTime.UTC().Format("2006-01-02T15:04:05Z"), e.info.ModTime.UTC().Format("2006-01-02T15:04:05Z"))
		}
	case !fi.ModTime.IsZero() && !e.info.ModTime.IsZero() && fi.ModTime.Unix() != e.info.ModTime.Unix():
		return fmt.Sprintf("modification time %s, cached copy %s", fi.ModTime.UTC().Format("2006-01-02T15:04:05Z"), e.info.ModTime.UTC().Format("2006-01-02T15:04:05Z"))
	case fi.ETag != "" && e.info.ETag != "" && fi.ETag != e.info.ETag:
		return fmt.Sprintf("ETag %s, cached copy %s", fi.ETag, e.info.ETag)
	}
	return ""
}

// spoil stops the entry for good (see above): its fetches end, its copy
// is removed from disk and index, and it leaves Cache.files so the next
// open of the key starts afresh (waiting until the removal is done).
// Readers holding it get why.
func (e *entry) spoil(why error) {
	c := e.c
	c.mu.Lock()
	if e.spoiled.Load() != nil {
		c.mu.Unlock()
		return
	}
	// Detached and the key marked closing before any reader can see the
	// reason: a reader that fails and opens again gets a fresh entry.
	if c.files[e.key] == e {
		c.forgetLocked(e)
		e.detached = true
	}
	var done chan struct{}
	if _, busy := c.closing[e.key]; !busy {
		done = make(chan struct{})
		c.closing[e.key] = done
	}
	delete(c.dirty, e)
	e.spoiled.Store(&why)
	// A retired entry has no client left to release it: its data file is
	// closed here.
	closeData := e.refs == 0 && e.retired
	c.mu.Unlock()
	e.cancel()
	// The data file is unlinked, not truncated: a sendfile in progress
	// still reads the old inode, and the next copy gets a new one.
	e.syncMu.Lock()
	c.cfg.FS.Remove(c.metaPath(e.key))
	c.cfg.FS.Remove(c.disks[e.disk].path(e.key))
	e.syncMu.Unlock()
	if closeData && e.data != nil {
		e.data.Close()
		e.data = nil
	}
	c.catalog.Remove(e.key)
	if done != nil {
		c.mu.Lock()
		delete(c.closing, e.key)
		c.mu.Unlock()
		close(done)
	}
}

// changedAtOrigin spoils e after a read found the origin's file replaced
// since the copy's version was opened.
func (e *entry) changedAtOrigin(cause error) {
	if e.spoilErr() != nil {
		return
	}
	e.c.stats.Revalidations.Add(1)
	e.c.cfg.Logger.Info("origin file changed while it was being cached: copy dropped, its readers get an I/O error",
		"key", e.key.String(), "err", cause)
	e.spoil(fmt.Errorf("%s: %w", e.key, errChanged))
}

// spoilErr returns why e is spoiled, or nil.
func (e *entry) spoilErr() error {
	if p := e.spoiled.Load(); p != nil {
		return *p
	}
	return nil
}

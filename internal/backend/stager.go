package backend

import (
	"fmt"
	"time"
)

// Stager warms the cache with whole files on request: kXR_prepare with
// kXR_stage, `hepcache prestage` through the admin socket and the HTTP
// prestage form all hand it their lists. Front ends that have none refuse
// the request.
type Stager interface {
	// Stage queues reqs (already authorized by the caller) and returns the
	// job's id at once; the files are fetched in the background. It fails
	// with an error wrapping ErrBusy when the queue is full.
	Stage(reqs []Request) (id string, err error)
	// StageStatus reports job id; false if no such job is known (finished
	// jobs are remembered for a while).
	StageStatus(id string) (StageJob, bool)
	// CancelStage stops the files of job id that are not done yet; false if
	// no such job is known.
	CancelStage(id string) bool
}

// Stage states of one file.
const (
	StageQueued    = "queued"
	StageRunning   = "staging"
	StageDone      = "done"
	StageFailed    = "failed"
	StageCancelled = "cancelled"
)

// StageJob is the progress of one prestage request.
type StageJob struct {
	ID        string      `json:"id"`
	Submitted time.Time   `json:"submitted"`
	Files     []StageFile `json:"files"`
}

// StageFile is the progress of one file of a job.
type StageFile struct {
	Path  string `json:"path"`
	State string `json:"state"`
	// Bytes were delivered from the cache so far; Size is the file's size
	// once it was opened.
	Bytes int64  `json:"bytes"`
	Size  int64  `json:"size"`
	Err   string `json:"error,omitempty"`
}

// Counts returns how many files of j are in each state.
func (j StageJob) Counts() map[string]int {
	m := make(map[string]int, 5)
	for _, f := range j.Files {
		m[f.State]++
	}
	return m
}

// Finished reports whether no file of j is queued or staging.
func (j StageJob) Finished() bool {
	c := j.Counts()
	return c[StageQueued] == 0 && c[StageRunning] == 0
}

// Text renders j for people and line-oriented tools: a summary line, then
// one line per file: state, bytes/size, path and any error.
func (j StageJob) Text() string {
	var b []byte
	c := j.Counts()
	b = fmt.Appendf(b, "job %s submitted %s: %d files, %d done, %d failed, %d cancelled, %d staging, %d queued\n",
		j.ID, j.Submitted.UTC().Format(time.RFC3339), len(j.Files), c[StageDone], c[StageFailed], c[StageCancelled], c[StageRunning], c[StageQueued])
	for _, f := range j.Files {
		b = fmt.Appendf(b, "%-9s %d/%d %s", f.State, f.Bytes, f.Size, f.Path)
		if f.Err != "" {
			b = fmt.Appendf(b, " (%s)", f.Err)
		}
		b = append(b, '\n')
	}
	return string(b)
}

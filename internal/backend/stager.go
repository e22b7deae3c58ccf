package backend

import (
	"errors"
	"fmt"
	"net"
	"time"
)

// Stager warms the cache with whole files on request: kXR_prepare with
// kXR_stage, `hepcache prestage` through the admin socket and the HTTP
// prestage form all hand it their lists. Front ends that have none refuse
// the request. A job belongs to the identity that submitted it (Owner):
// only that identity, or the admin, may query or cancel it.
type Stager interface {
	// Stage queues reqs (already authorized by the caller) as a job of
	// owner and returns the job's id (unguessable) at once; the files are
	// fetched in the background. It fails with an error wrapping ErrBusy
	// when the queue or the memory for lists is full.
	Stage(owner Owner, reqs []Request) (id string, err error)
	// StageStatus reports job id to owner. It fails with an error wrapping
	// ErrUnknownJob (no such job: finished jobs are remembered for a
	// while) or ErrForbidden (the job is someone else's).
	StageStatus(owner Owner, id string) (StageJob, error)
	// CancelStage stops the files of job id that are not done yet, with
	// the errors of StageStatus.
	CancelStage(owner Owner, id string) error
}

// Owner is who submits or asks about a prestage job, as the front end's
// authorizer sees the client.
type Owner struct {
	// Name is "user:NAME" for a client that authenticated (token subject,
	// certificate DN), "host:IP" for one without a credential (a login
	// name proves nothing), "admin" for the admin socket.
	Name string
	// Admin may query and cancel every job (the admin socket only).
	Admin bool
}

// UserOwner is the Owner of an authenticated identity.
func UserOwner(name string) Owner { return Owner{Name: "user:" + name} }

// HostOwner is the Owner of a client without a credential at addr
// ("ip:port" or "ip"): its jobs are its host's.
func HostOwner(addr string) Owner {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		addr = h
	}
	return Owner{Name: "host:" + addr}
}

// AdminOwner is the admin socket's Owner.
var AdminOwner = Owner{Name: "admin", Admin: true}

// ErrUnknownJob: no prestage job has this id (or it was forgotten).
var ErrUnknownJob = errors.New("prestage: unknown job")

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
	ID        string    `json:"id"`
	Submitted time.Time `json:"submitted"`
	// Owner is who submitted the job (Owner.Name).
	Owner string `json:"owner"`
	// Total is the job's number of files; Counts how many are in each
	// state (StageQueued...).
	Total  int            `json:"total"`
	Counts map[string]int `json:"counts"`
	// Bytes were delivered from the cache so far; Size is the total size
	// of the files opened so far.
	Bytes int64 `json:"bytes"`
	Size  int64 `json:"size"`
	// Files is each file's progress while the job runs; nil once it has
	// finished: a finished job keeps its counts and FirstError only, so
	// that the jobs remembered cost little memory whatever their lists.
	Files []StageFile `json:"files,omitempty"`
	// FirstError is the first failure (file and reason), "" if none.
	FirstError string `json:"first_error,omitempty"`
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

// Finished reports whether no file of j is queued or staging.
func (j StageJob) Finished() bool {
	return j.Counts[StageQueued] == 0 && j.Counts[StageRunning] == 0
}

// Text renders j for people and line-oriented tools: a summary line, then
// while the job runs one line per file: state, bytes/size, path and any
// error; once it finished, its first error.
func (j StageJob) Text() string {
	var b []byte
	c := j.Counts
	b = fmt.Appendf(b, "job %s submitted %s: %d files, %d done, %d failed, %d cancelled, %d staging, %d queued\n",
		j.ID, j.Submitted.UTC().Format(time.RFC3339), j.Total, c[StageDone], c[StageFailed], c[StageCancelled], c[StageRunning], c[StageQueued])
	for _, f := range j.Files {
		b = fmt.Appendf(b, "%-9s %d/%d %s", f.State, f.Bytes, f.Size, f.Path)
		if f.Err != "" {
			b = fmt.Appendf(b, " (%s)", f.Err)
		}
		b = append(b, '\n')
	}
	if j.Files == nil && j.FirstError != "" {
		b = fmt.Appendf(b, "first error: %s\n", j.FirstError)
	}
	return string(b)
}

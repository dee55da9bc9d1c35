// Bounded observation: the filters and rows behind the paged listings, the
// counts and the rates (core/observe.go holds their rules; each store its SQL).
package store

import "context"

// JobFilter selects one page of a production's jobs in request order
// (seq): those with seq > AfterSeq, at most Limit of them. Each filter is
// exact; "" leaves it out. One state at a time: the rules merge the pages of
// several states, so that every query is one index range. BeforeSeq (0: no
// bound) keeps seq < BeforeSeq; Backward reads the same range from its
// other end: the Limit jobs just below BeforeSeq, newest first (the same
// index, walked backwards).
type JobFilter struct {
	ProductionID string
	State        string
	Key          string
	ID           string
	AfterSeq     int64
	BeforeSeq    int64
	Backward     bool
	// KeyFrom, when not "", lists in byte order of the key instead of
	// request order, one range of the (production, key) index: the keys at
	// or above KeyFrom, above KeyAfter and below KeyBelow ("": no bound);
	// Backward reads the range from its top. Key, ID and the seq bounds are
	// not used with it.
	KeyFrom  string
	KeyAfter string
	KeyBelow string
	Limit    int
}

// WorkerJobFilter selects the jobs whose claim Worker holds or last held
// (the job's worker is Worker and its claim is the one Worker made), newest
// claim first: Worker's claimed events in the production, read from the
// index of worker events from the top down, each kept when the job's claim
// is still that one, so a job is met once. BeforeAt and BeforeID (0: from
// the newest) keep claims made before BeforeAt, or at it by a job whose id
// sorts before BeforeID. Newer reads the other way: the claims after
// (AfterAt, AfterID), oldest first (the same index walked up). States (any
// of; none: every), Key and ID (exact; "": any) filter the jobs met.
type WorkerJobFilter struct {
	ProductionID string
	Worker       string
	States       []string
	Key          string
	ID           string
	BeforeAt     int64
	BeforeID     string
	Newer        bool
	AfterAt      int64
	AfterID      string
	Limit        int
}

// JobTimesRow is when a job was requested, when it was first claimed (its
// first claimed event; 0 when none) and its newest ended attempt (Last;
// Last.EndedAt 0 when none ended).
type JobTimesRow struct {
	ID             string
	RequestedAt    int64
	FirstClaimedAt int64
	Last           Attempt
}

// JobRow is a listed job: everything but the payload (never read by a
// listing) and the claim hash, with the payload's size instead.
type JobRow struct {
	Job
	PayloadSize int64
}

// JobIDFilter selects the ids of jobs with From <= id < To, in id order, at
// most Limit of them: one range of the primary key. To "" has no upper
// bound; ProductionID "" is every production.
type JobIDFilter struct {
	ProductionID string
	From, To     string
	Limit        int
}

// JobIDRow is a job id and its production's id.
type JobIDRow struct {
	ID           string
	ProductionID string
}

// EventFilter selects one page of events in seq order: seq > AfterSeq and
// seq < Before, at most Limit. ProductionID, JobID and Kind are exact; ""
// leaves one out. With a JobID the production is not consulted (a job's
// events are its production's); a Kind needs a ProductionID or a JobID.
// Newest reads the same range from its other end: the Limit events just
// below Before, newest first (the same index, walked backwards).
type EventFilter struct {
	ProductionID string
	JobID        string
	Kind         string
	AfterSeq     int64
	Before       int64
	Limit        int
	Newest       bool
}

// JobCounts is a production's jobs by state, how many claimed jobs had
// expired at the given time, and the request time of the first requested
// job in request order (0 when none).
type JobCounts struct {
	ByState         map[string]int64
	Expired         int64
	OldestRequested int64
}

// Bucket is the number of events in [Start, Start+width), unix µs.
type Bucket struct {
	Start int64
	Count int64
}

// WorkerSeen is one worker: the last event it caused since a time (0 when
// none) and the unexpired claims it holds.
type WorkerSeen struct {
	Worker   string
	LastSeen int64
	Holding  int64
}

// WorkerSet gathers WorkerSeen rows by name, in the order first met.
type WorkerSet struct {
	List []WorkerSeen
	at   map[string]int
}

// Get is the row of worker name, added if new.
func (s *WorkerSet) Get(name string) *WorkerSeen {
	if s.at == nil {
		s.at = map[string]int{}
	}
	i, ok := s.at[name]
	if !ok {
		i = len(s.List)
		s.at[name] = i
		s.List = append(s.List, WorkerSeen{Worker: name})
	}
	return &s.List[i]
}

// JobStates are every state a job can be in: the counts count each.
var JobStates = []string{StateRequested, StateClaimed, StateCompleted, StateFailed, StateCancelled, StateDead}

// WorkerKinds are the events a worker causes itself.
var WorkerKinds = []string{"claimed", "renewed", "released", "failed", "retry", "completed"}

// Observer answers the bounded observations. Each call is one short read
// (one statement or a few, each its own snapshot): none holds a read
// transaction open between calls, so a paging loop never pins the WAL.
type Observer interface {
	// ListProductions lists productions with name > after, by name.
	ListProductions(ctx context.Context, after string, limit int) ([]Production, error)
	ListJobs(ctx context.Context, f JobFilter) ([]JobRow, error)
	// ListWorkerJobs reads one page of the jobs a worker's claim holds or
	// last held (WorkerJobFilter).
	ListWorkerJobs(ctx context.Context, f WorkerJobFilter) ([]JobRow, error)
	// JobTimes reads the times of those of ids that are jobs of the
	// production (JobTimesRow), in one statement: a few index seeks per id.
	JobTimes(ctx context.Context, productionID string, ids []string) ([]JobTimesRow, error)
	// JobIDs lists job ids in a range of the primary key (JobIDFilter).
	JobIDs(ctx context.Context, f JobIDFilter) ([]JobIDRow, error)
	// CountJobs counts a production's jobs; claims with expiry <= now are
	// the expired ones.
	CountJobs(ctx context.Context, productionID string, now int64) (JobCounts, error)
	// CountEveryProduction counts the jobs of every production that has
	// any, as CountJobs counts one production's, by production id; a
	// production without jobs is absent. It is one read (a statement or
	// two, however many productions there are) of the index of jobs by
	// state and of the partial index of claims, never of the event log.
	CountEveryProduction(ctx context.Context, now int64) (map[string]JobCounts, error)
	// EventHorizon is the seq below which every event is final: none will
	// ever be added there (PostgreSQL: docs/postgres.md).
	EventHorizon(ctx context.Context) (int64, error)
	ListEvents(ctx context.Context, f EventFilter) ([]Event, error)
	// CountEvents counts a production's events of kind with at >= since, in
	// buckets of width µs aligned to the unix epoch; empty buckets are left out.
	CountEvents(ctx context.Context, productionID, kind string, since, width int64) ([]Bucket, error)
	// Workers lists the workers that caused an event (WorkerKinds) since
	// `since`, most recent first, at most limit, and every worker holding a
	// claim unexpired at now.
	Workers(ctx context.Context, productionID string, since, now int64, limit int) ([]WorkerSeen, error)
}

// Archives: what pruning deletes, written as JSON Lines and synced before
// it is deleted (docs/CONCEPTS.md, "Archives").
package core

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/libleases/libleases/core/store"
)

// An archive is a sequence of batches. Each batch is its records — one
// line per job ("job": the job as JobDetail shows it, its payload and its
// events) or per event pruned by age ("event") — then a "batch" line that
// names everything the batch may delete; the file is synced, the batch is
// deleted, and a "deleted" line ends it (synced too). Reading an archive,
// skip records whose batch has no "batch" line: they were never deleted.
//
// Reopened, an archive is first cut back to the end of its last "batch" or
// "deleted" line (records of a batch that was never marked were never
// deleted, and will be written again), and a batch marked but not ended is
// deleted before anything else: so nothing is deleted that is not in the
// archive, and nothing is written to it twice.
type archive struct {
	f    *os.File
	path string
	next int64 // the next batch's number
	open *archiveMark
}

// archiveMark is a "batch" line: what the batch may delete.
type archiveMark struct {
	Type         string        `json:"type"`
	Batch        int64         `json:"batch"`
	Production   string        `json:"production"`
	ProductionID string        `json:"production_id"`
	Jobs         []archivedJob `json:"jobs"`
	Events       []int64       `json:"event_seqs"`
}

// archivedJob names a job a batch may delete, as it was archived: it is
// deleted only if it is still so (a redriven job is kept), with exactly the
// events archived with it.
type archivedJob struct {
	ID        string  `json:"id"`
	State     string  `json:"state"`
	UpdatedAt int64   `json:"updated_at_unix_us"`
	Events    []int64 `json:"event_seqs"`
}

type archiveJobLine struct {
	Type       string          `json:"type"`
	Batch      int64           `json:"batch"`
	Production string          `json:"production"`
	Job        json.RawMessage `json:"job"`
	Payload    []byte          `json:"payload"`
	Events     []Event         `json:"events"`
}

type archiveEventLine struct {
	Type  string `json:"type"`
	Batch int64  `json:"batch"`
	Event Event  `json:"event"`
}

type archiveDone struct {
	Type   string `json:"type"`
	Batch  int64  `json:"batch"`
	Jobs   int64  `json:"deleted_jobs"`
	Events int64  `json:"deleted_events"`
}

// pruneStep is a test seam: called once a batch's mark is synced
// ("marked"), and after each transaction that deleted part of it
// ("deleting").
var pruneStep = func(step string, batch int64) {}

// maxArchiveLine bounds one line: a job's payload (1 MiB, base64) and facts
// (1 MiB) and its events.
const maxArchiveLine = 256 << 20

func openArchive(path string) (*archive, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, errf(KindInvalidArgument, "cannot open the archive: %v", err)
	}
	ar := &archive{f: f, path: path, next: 1}
	if err := ar.recover(); err != nil {
		f.Close()
		return nil, err
	}
	// A new file's name is durable once its directory is synced.
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return ar, nil
}

// recover reads the archive, cuts it back to its last mark and finds a
// batch marked but not ended.
func (ar *archive) recover() error {
	r := bufio.NewReaderSize(ar.f, 1<<20)
	var off, keep int64
	for {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			break // a line without its newline is torn: cut
		}
		if err != nil {
			return errf(KindStorage, "cannot read the archive: %v", err)
		}
		if len(line) > maxArchiveLine {
			return errf(KindInvalidArgument, "the archive has a line longer than %d bytes", maxArchiveLine)
		}
		off += int64(len(line))
		var head struct {
			Type  string `json:"type"`
			Batch int64  `json:"batch"`
		}
		if json.Unmarshal(line, &head) != nil {
			return errf(KindInvalidArgument, "the archive is not one this library wrote (a line is not JSON)")
		}
		switch head.Type {
		case "batch":
			var m archiveMark
			if err := json.Unmarshal(line, &m); err != nil {
				return errf(KindInvalidArgument, "the archive has a malformed batch line: %v", err)
			}
			ar.open, ar.next, keep = &m, m.Batch+1, off
		case "deleted":
			ar.open, ar.next, keep = nil, head.Batch+1, off
		case "job", "event":
		default:
			return errf(KindInvalidArgument, "the archive is not one this library wrote (line type %q)", head.Type)
		}
	}
	if err := ar.f.Truncate(keep); err != nil {
		return errf(KindStorage, "cannot cut the archive back to its last batch: %v", err)
	}
	if _, err := ar.f.Seek(keep, io.SeekStart); err != nil {
		return errf(KindStorage, "cannot append to the archive: %v", err)
	}
	return ar.sync()
}

func (ar *archive) sync() error {
	if err := ar.f.Sync(); err != nil {
		return errf(KindStorage, "cannot sync the archive: %v", err)
	}
	return nil
}

func (ar *archive) write(lines [][]byte) error {
	var buf bytes.Buffer
	for _, l := range lines {
		buf.Write(l)
		buf.WriteByte('\n')
	}
	if _, err := ar.f.Write(buf.Bytes()); err != nil {
		return errf(KindStorage, "cannot write the archive: %v", err)
	}
	return ar.sync()
}

func (ar *archive) close() error { return ar.f.Close() }

func line(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	return b, nil
}

// finishArchived deletes the batch an interrupted prune marked but did not
// end.
func (a *Authority) finishArchived(ctx context.Context, ar *archive) (PruneResult, error) {
	if ar.open == nil {
		return PruneResult{}, nil
	}
	return a.deleteArchived(ctx, ar, ar.open)
}

// pruneArchived is one batch with an archive: the batch is planned (a
// transaction that writes nothing), its records read and written to the
// archive with its mark and synced, and then deleted.
func (a *Authority) pruneArchived(ctx context.Context, ar *archive, production, state string, older int64) (PruneResult, bool, error) {
	var jobs []store.Job
	var evs []store.Event
	var p store.Production
	var more bool
	err := a.write(ctx, func(tx store.Tx, now int64, _ *wakes) error {
		var err error
		if p, err = productionByName(ctx, tx, production); err != nil {
			return err
		}
		if state == "" {
			evs, more, err = planEvents(ctx, tx, p, older, now)
		} else {
			jobs, more, err = planJobs(ctx, tx, p, state, older, now, PruneJobBatch)
		}
		return err
	})
	if err != nil || len(jobs)+len(evs) == 0 {
		return PruneResult{}, false, err
	}
	m := &archiveMark{Type: "batch", Batch: ar.next, Production: p.Name, ProductionID: p.ID,
		Jobs: []archivedJob{}, Events: []int64{}}
	var lines [][]byte
	for _, j := range jobs {
		rec, err := a.JobDetail(ctx, p.Name, j.ID)
		var e *Error
		if errors.As(err, &e) && e.Kind == KindNotFound {
			continue // pruned meanwhile by another pruner
		}
		if err != nil {
			return PruneResult{}, false, err
		}
		if rec.State != j.State || rec.UpdatedAt.UnixMicro() != j.UpdatedAt {
			continue // changed since planned: kept
		}
		var jevs []Event
		if _, err := a.EachEvent(ctx, EventQuery{Production: p.Name, JobID: j.ID, Limit: MaxPageSize}, func(e Event) error {
			jevs = append(jevs, e)
			return nil
		}); err != nil {
			return PruneResult{}, false, err
		}
		job, err := line(rec)
		if err != nil {
			return PruneResult{}, false, err
		}
		l, err := line(archiveJobLine{Type: "job", Batch: m.Batch, Production: p.Name, Job: job, Payload: j.Payload,
			Events: nonNilEvents(jevs)})
		if err != nil {
			return PruneResult{}, false, err
		}
		lines = append(lines, l)
		aj := archivedJob{ID: j.ID, State: j.State, UpdatedAt: j.UpdatedAt, Events: []int64{}}
		for _, e := range jevs {
			aj.Events = append(aj.Events, e.Seq)
		}
		m.Jobs = append(m.Jobs, aj)
	}
	for _, e := range evs {
		l, err := line(archiveEventLine{Type: "event", Batch: m.Batch, Event: toEvent(p.Name, e)})
		if err != nil {
			return PruneResult{}, false, err
		}
		lines = append(lines, l)
		m.Events = append(m.Events, e.Seq)
	}
	if len(m.Jobs)+len(m.Events) == 0 {
		return PruneResult{}, false, nil
	}
	mark, err := line(m)
	if err != nil {
		return PruneResult{}, false, err
	}
	if err := ar.write(append(lines, mark)); err != nil {
		return PruneResult{}, false, err
	}
	ar.open, ar.next = m, m.Batch+1
	pruneStep("marked", m.Batch)
	res, err := a.deleteArchived(ctx, ar, m)
	return res, more, err
}

func nonNilEvents(e []Event) []Event {
	if e == nil {
		return []Event{}
	}
	return e
}

// deleteArchived deletes what batch m archived, in transactions of at most
// PruneJobBatch jobs and PruneEventBatch events, then ends the batch in the
// archive. A job is deleted only if it is still as archived, and with it
// only the events archived with it.
func (a *Authority) deleteArchived(ctx context.Context, ar *archive, m *archiveMark) (PruneResult, error) {
	var res PruneResult
	for i := 0; i < len(m.Events); i += PruneEventBatch {
		seqs := m.Events[i:min(i+PruneEventBatch, len(m.Events))]
		var n int64
		if err := a.write(ctx, func(tx store.Tx, _ int64, _ *wakes) error {
			var err error
			n, err = tx.DeleteEvents(ctx, m.ProductionID, seqs)
			return storageErrOrNil("prune events", err)
		}); err != nil {
			return res, err
		}
		res.Events += n
		res.Batches++
		pruneStep("deleting", m.Batch)
	}
	// A cursor over the jobs and each job's events: each transaction takes
	// up to its budget of both.
	ji, ei := 0, 0
	for ji < len(m.Jobs) {
		var jobs, events int64
		startJ, startE := ji, ei
		err := a.write(ctx, func(tx store.Tx, _ int64, _ *wakes) error {
			ji, ei, jobs, events = startJ, startE, 0, 0
			budget, taken := PruneEventBatch, 0
			for ji < len(m.Jobs) && taken < PruneJobBatch {
				aj := m.Jobs[ji]
				j, err := tx.JobByID(ctx, aj.ID)
				if errors.Is(err, store.ErrNoRow) || (err == nil && (j.ProductionID != m.ProductionID ||
					j.State != aj.State || j.UpdatedAt != aj.UpdatedAt)) {
					ji, ei = ji+1, 0 // gone, or changed since archived: kept
					continue
				}
				if err != nil {
					return storageErr("prune a job", err)
				}
				if ei < len(aj.Events) {
					if budget == 0 {
						return nil
					}
					seqs := aj.Events[ei:min(ei+budget, len(aj.Events))]
					n, err := tx.DeleteEvents(ctx, m.ProductionID, seqs)
					if err != nil {
						return storageErr("prune a job's events", err)
					}
					events += n
					budget -= len(seqs)
					ei += len(seqs)
					if ei < len(aj.Events) {
						return nil
					}
				}
				if err := tx.DeleteJob(ctx, aj.ID); err != nil {
					return storageErr("prune a job", err)
				}
				jobs++
				taken++
				ji, ei = ji+1, 0
			}
			return nil
		})
		if err != nil {
			return res, err
		}
		res.Jobs += jobs
		res.Events += events
		res.Batches++
		pruneStep("deleting", m.Batch)
	}
	done, err := line(archiveDone{Type: "deleted", Batch: m.Batch, Jobs: res.Jobs, Events: res.Events})
	if err != nil {
		return res, err
	}
	if err := ar.write([][]byte{done}); err != nil {
		return res, err
	}
	ar.open = nil
	return res, nil
}

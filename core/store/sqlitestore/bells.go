// Doorbells: how a commit that may make a production's job claimable
// reaches the waiters of that production in other processes, and only them.
package sqlitestore

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/libleases/libleases/core/store"
)

var _ store.Notifier = (*Tx)(nil)

// A write transaction that may make a production's job claimable (a
// request, a release, a retryable failure, a redrive: core tells it through
// Claimable) rings that production's doorbell once it has committed: it
// opens the file named after the production's id, in the directory beside
// the database named by bellsSuffix (creating it, empty), and closes it.
// Nothing is written and nothing is synced: the close is the ring
// (inotify's IN_CLOSE_NOWRITE, which names the file); opened for reading,
// a bell another user created still rings. A watcher makes the directory and
// waits on it (watch.go), so a process whose waiters wait on an empty
// production is not woken by the commits of another production (the claims
// and completions of a busy one ring nothing at all), and when a ring comes
// it knows which production to wake. A writer never makes the directory:
// without it nobody listens, and the ring is one failed open. A ring that
// fails is not the transaction's failure: the watcher also reads the WAL
// for every commit, later (foreignEvery), and the safety poll remains.
const bellsSuffix = "-bells"

// bellsDir is the doorbells' directory of the database at path.
func bellsDir(path string) string { return path + bellsSuffix }

// bellName is the file of a production's doorbell: its id, when the id is
// a plain name (core's ids are UUIDs); false for any other id, which then
// rings nothing.
func bellName(productionID string) (string, bool) {
	if productionID == "" || len(productionID) > 100 {
		return "", false
	}
	for _, c := range productionID {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return "", false
		}
	}
	return productionID, true
}

// Claimable records that productionID may have a claimable job once this
// transaction commits: its doorbell rings after the commit, never before
// and never without it.
func (t *Tx) Claimable(_ context.Context, productionID string) error {
	if !slices.Contains(t.rings, productionID) {
		t.rings = append(t.rings, productionID)
	}
	return nil
}

// ring rings the doorbells of productions, best effort.
func ring(path string, productions []string) {
	dir := bellsDir(path)
	for _, id := range productions {
		name, ok := bellName(id)
		if !ok {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDONLY|os.O_CREATE, 0o666)
		if errors.Is(err, fs.ErrNotExist) {
			return // nobody listens
		}
		if err == nil {
			f.Close()
		}
	}
}

// makeBells makes the doorbells' directory if it is missing (a watcher
// does); its mode is the database's with the search bits of each class that
// may read it, so that whoever may write the database may ring.
func makeBells(path string) error {
	mode := fs.FileMode(0o777)
	if fi, err := os.Stat(path); err == nil {
		m := fi.Mode().Perm()
		mode = m | (m&0o444)>>2
	}
	err := os.Mkdir(bellsDir(path), mode)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err == nil {
		_ = os.Chmod(bellsDir(path), mode) // past the umask, as the database's own mode is
	}
	return err
}

// Processes that open one new SQLite file at the same moment: the file is
// created once and every opener gets the same authority.
package core

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// openerProcess waits for the start file, opens the database (creating it if
// nobody has yet) and requests one job keyed by its name.
func openerProcess(path, goFile, name string) int {
	if !awaitStart(goFile, 200*time.Microsecond) {
		return 2
	}
	a, err := Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 1
	}
	defer a.Close()
	if _, err := a.CreateProduction("p"); err != nil && !strings.Contains(err.Error(), "already exists") {
		fmt.Fprintln(os.Stderr, "create production:", err)
		return 1
	}
	if _, err := a.RequestJob("p", name, nil); err != nil {
		fmt.Fprintln(os.Stderr, "request:", err)
		return 1
	}
	return 0
}

func TestProcessesCreatingOneNewFileAtOnceAllOpenTheSameAuthority(t *testing.T) {
	if testingPostgres() {
		t.Skip("the SQLite file itself; it runs in the SQLite pass")
	}
	const procs, rounds = 6, 8
	for round := 0; round < rounds; round++ {
		dir := t.TempDir()
		path, goFile := filepath.Join(dir, "new.db"), filepath.Join(dir, "go")
		var wg sync.WaitGroup
		errs := make([]string, procs)
		for i := 0; i < procs; i++ {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "LEASES_TEST_OPENER="+fmt.Sprintf("w%d", i), "LEASES_TEST_DB="+path,
				"LEASES_TEST_GO="+goFile)
			var out strings.Builder
			cmd.Stderr = &out
			require.NoError(t, cmd.Start())
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				if err := cmd.Wait(); err != nil {
					errs[i] = fmt.Sprintf("%v: %s", err, out.String())
				}
			}(i)
		}
		time.Sleep(100 * time.Millisecond) // let them all reach the start line
		require.NoError(t, os.WriteFile(goFile, nil, 0o600))
		wg.Wait()
		for i, e := range errs {
			require.Empty(t, e, "round %d: opener %d failed", round, i)
		}
		a, err := Open(path)
		require.NoError(t, err)
		js, err := a.Jobs("p")
		require.NoError(t, err)
		require.Len(t, js, procs, "every opener's job is in the one file")
		require.NoError(t, a.Close())
	}
}

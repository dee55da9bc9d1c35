package core

// A SQLite file removed or replaced under a writer in another process: the
// writer's next transaction fails with a clear storage error, it never
// reports ok after that, a second opener does not create a parallel
// authority, and no file is left corrupt (sqlitestore/identity.go).

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fileWriterProcess serves one line command at a time on stdin: "w" requests
// a job, "r" lists the jobs, "b N" requests up to N jobs back to back, "q"
// quits. Each attempt prints "ok" or "err <kind> <message>".
func fileWriterProcess(path string) int {
	a, err := Open(path)
	if err != nil {
		fmt.Println("err open", err)
		return 2
	}
	defer a.Close()
	if _, err := a.CreateProduction("p"); err != nil {
		fmt.Println("err create", err)
		return 2
	}
	n := 0
	write := func() {
		n++
		_, err := a.RequestJob("p", "k"+strconv.Itoa(n), nil)
		report(err)
	}
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		switch f[0] {
		case "w":
			write()
		case "r":
			_, err := a.Jobs("p")
			report(err)
		case "b":
			count, _ := strconv.Atoi(f[1])
			for i := 0; i < count; i++ {
				write()
			}
			fmt.Println("end")
		case "q":
			return 0
		}
	}
	return 0
}

func report(err error) {
	if err == nil {
		fmt.Println("ok")
		return
	}
	fmt.Println("err", KindOf(err), strings.ReplaceAll(err.Error(), "\n", " "))
}

type fileWriter struct {
	t   *testing.T
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startFileWriter(t *testing.T, path string) *fileWriter {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LEASES_TEST_FILE_WRITER="+path)
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	w := &fileWriter{t: t, cmd: cmd, in: in, out: bufio.NewScanner(out)}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	require.Equal(t, "ready", w.line())
	return w
}

func (w *fileWriter) line() string {
	w.t.Helper()
	require.True(w.t, w.out.Scan(), "the writer process ended: %v", w.out.Err())
	return w.out.Text()
}

func (w *fileWriter) do(cmd string) string {
	w.t.Helper()
	_, err := fmt.Fprintln(w.in, cmd)
	require.NoError(w.t, err)
	return w.line()
}

func (w *fileWriter) quit() {
	w.t.Helper()
	fmt.Fprintln(w.in, "q")
	require.NoError(w.t, w.cmd.Wait())
}

// requireGone checks one reply: storage (outcome_unknown for a commit the
// change overtook) with the message that says what happened and what to do.
func requireGone(t *testing.T, reply string) {
	t.Helper()
	require.True(t, strings.HasPrefix(reply, "err storage ") || strings.HasPrefix(reply, "err outcome_unknown "), reply)
	require.Contains(t, reply, "removed or replaced")
	require.Contains(t, reply, "reopen the authority")
}

func TestADatabaseFileRemovedOrReplacedUnderAWriterIsNeverAcknowledgedInto(t *testing.T) {
	if testingPostgres() {
		t.Skip("the SQLite file itself; PostgreSQL has no file")
	}
	for name, change := range map[string]func(t *testing.T, path string){
		"rm the file": func(t *testing.T, path string) { require.NoError(t, os.Remove(path)) },
		"rm all three files": func(t *testing.T, path string) {
			for _, suffix := range []string{"", "-wal", "-shm"} {
				require.NoError(t, os.Remove(path+suffix))
			}
		},
		"mv another database over it": func(t *testing.T, path string) {
			other := filepath.Join(filepath.Dir(path), "other.db")
			b, err := Open(other)
			require.NoError(t, err)
			_, err = b.CreateProduction("other")
			require.NoError(t, err)
			_, err = b.RequestJob("other", "", nil)
			require.NoError(t, err)
			require.NoError(t, b.Close())
			require.NoError(t, os.Rename(other, path))
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f.db")
			w := startFileWriter(t, path)
			for i := 0; i < 5; i++ {
				require.Equal(t, "ok", w.do("w"))
			}
			// The change lands while the writer writes back to back: once it
			// has failed, it never reports ok again.
			_, err := fmt.Fprintln(w.in, "b 400")
			require.NoError(t, err)
			for i := 0; i < 20; i++ {
				require.Equal(t, "ok", w.line())
			}
			change(t, path)
			failed := false
			for reply := w.line(); reply != "end"; reply = w.line() {
				if reply == "ok" {
					require.False(t, failed, "ok after a failure")
					continue
				}
				requireGone(t, reply)
				failed = true
			}
			require.True(t, failed, "the writer noticed the change within its burst")
			// Every later call fails, reads too.
			requireGone(t, w.do("w"))
			requireGone(t, w.do("r"))

			// A second opener meanwhile never makes a second authority at
			// the path; after mv it opens the file now there.
			_, statErr := os.Stat(path)
			second, err := Open(path)
			if os.IsNotExist(statErr) {
				requireKind(t, err, KindStorage)
				require.Contains(t, err.Error(), "still has the removed file open")
				_, err = os.Stat(path)
				require.True(t, os.IsNotExist(err), "the refused opener created no file")
			} else {
				require.NoError(t, err)
				ps, err := second.Productions()
				require.NoError(t, err)
				require.Len(t, ps, 1)
				require.Equal(t, "other", ps[0].Name)
				require.NoError(t, second.Close())
			}
			w.quit()

			// What remains at the path is sound: the file moved there, intact
			// beside whatever WAL the writer left; or a new, empty authority.
			a, err := Open(path)
			require.NoError(t, err)
			defer a.Close()
			check, err := a.b.(interface{ Pragma(string) (string, error) }).Pragma("integrity_check")
			require.NoError(t, err)
			require.Equal(t, "ok", check)
			ps, err := a.Productions()
			require.NoError(t, err)
			if _, moved := map[string]bool{"mv another database over it": true}[name]; moved {
				require.Len(t, ps, 1)
				require.Equal(t, "other", ps[0].Name)
				js, err := a.Jobs("other")
				require.NoError(t, err)
				require.Len(t, js, 1)
			} else {
				require.Empty(t, ps, "a new authority: nothing of the removed file")
			}
		})
	}
}

package reliability

// The secret-leak scan: every file a run left behind (histories with every
// error string, stdout/stderr of every worker, listings, the database and its
// -wal and -shm files) is searched for every token the run exported and for
// every claim secret in every form a careless formatter could print. Only
// the token files themselves (the tokens/ folder) may hold a credential.

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/libleases/libleases/core"
	"github.com/stretchr/testify/require"
)

// secretForms lists the ways a secret (or its token) could appear.
func secretForms(tok string) []string {
	t, err := core.DecodeToken(tok)
	if err != nil {
		return nil
	}
	secret := t.Secret.Bytes()
	raw := secret[:]
	u := uuid.UUID(secret).String()
	h := hex.EncodeToString(raw)
	return []string{
		tok, strings.TrimPrefix(tok, "lt1."),
		string(raw),
		h, strings.ToUpper(h),
		u, strings.ToUpper(u),
		base64.StdEncoding.EncodeToString(raw), base64.RawStdEncoding.EncodeToString(raw),
		base64.URLEncoding.EncodeToString(raw), base64.RawURLEncoding.EncodeToString(raw),
	}
}

// scanForSecrets fails the test if any file under dir (except dir/tokens)
// holds any form of any token's secret. It returns the number of secrets
// searched for.
func scanForSecrets(t *testing.T, dir string, tokens []string) int {
	t.Helper()
	hits, files := findSecrets(dir, tokens)
	for _, h := range hits {
		t.Error(h)
	}
	require.Positive(t, files)
	return len(tokens)
}

// findSecrets lists every hit (file, offset, form length) and counts the
// files read.
func findSecrets(dir string, tokens []string) (hits []string, files int) {
	needles := map[int]map[string]string{} // length -> form -> token
	for _, tok := range tokens {
		for _, f := range secretForms(tok) {
			if needles[len(f)] == nil {
				needles[len(f)] = map[string]string{}
			}
			needles[len(f)][f] = tok
		}
	}
	filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return nil // a file removed while walking (a -wal after checkpoint)
		}
		if info.IsDir() {
			if path == filepath.Join(dir, "tokens") {
				return filepath.SkipDir
			}
			return nil
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		files++
		for n, set := range needles {
			for i := 0; i+n <= len(b); i++ {
				if _, hit := set[string(b[i:i+n])]; hit {
					hits = append(hits, fmt.Sprintf("a claim secret (form of length %d) appears in %s at byte %d", n, path, i))
					return nil
				}
			}
		}
		return nil
	})
	return hits, files
}

// The scanner must find each form of a planted secret, or a clean scan
// proves nothing.
func TestLeakScanFindsEveryFormOfAPlantedSecret(t *testing.T) {
	tok, err := core.EncodeToken(core.Token{ProductionID: uuid.NewString(), JobID: uuid.NewString(),
		Secret: core.NewSecret(uuid.New())})
	require.NoError(t, err)
	for i, form := range secretForms(tok) {
		dir := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "tokens"), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "tokens", "t"), []byte(tok), 0o600))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "out.log"), []byte("before "+form+" after"), 0o600))
		hits, files := findSecrets(dir, []string{tok})
		require.Equal(t, 1, files, "the token folder is not scanned")
		require.NotEmpty(t, hits, "form %d (%q) was not found", i, form)
	}
	hits, _ := findSecrets(t.TempDir(), []string{tok})
	require.Empty(t, hits)
}

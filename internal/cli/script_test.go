package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/converge-dev/converge/internal/cli"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"converge": func() { os.Exit(cli.Main()) },
	})
}

// TestScripts runs testdata/script/*.txtar: every CLI behaviour and error
// message with its expected output, in the manner of cue-lang/cue's
// cmd/cue tests. $ROOT is the repository root; plain `cue` is the pinned
// CLI built into bin/ by `make test`.
func TestScripts(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:           filepath.Join(root, "testdata", "script"),
		UpdateScripts: os.Getenv("UPDATE_GOLDEN") != "",
		Setup: func(env *testscript.Env) error {
			env.Setenv("ROOT", root)
			return nil
		},
		Condition: func(cond string) (bool, error) {
			if cond == "cue" {
				_, err := exec.LookPath("cue")
				return err == nil, nil
			}
			return false, nil
		},
	})
}

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	localcluster "github.com/converge-dev/converge/internal/testing/cluster"
)

// gitEnv makes every git command hermetic: no system or user
// configuration, a fixed author.
var gitEnv = []string{
	"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
	"GIT_AUTHOR_NAME=Platform Engineer", "GIT_AUTHOR_EMAIL=platform@example.com",
	"GIT_COMMITTER_NAME=Platform Engineer", "GIT_COMMITTER_EMAIL=platform@example.com",
}

// git runs the git CLI in dir and returns its trimmed stdout, or an
// error naming the command and carrying git's stderr.
func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), gitEnv...)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("git %s in %s: %w: %s", strings.Join(args, " "), dir, err, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", fmt.Errorf("git %s in %s: %w (the demo needs the git CLI)", strings.Join(args, " "), dir, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// configRepo is the platform team's config repository: a work tree at
// Dir below the served root, on branch main.
type configRepo struct {
	Dir  string
	Name string
}

// newConfigRepo creates root/name on branch main with every file of from
// in its directory dir, and commits it.
func newConfigRepo(root, name, from, dir string) (*configRepo, error) {
	r := &configRepo{Dir: filepath.Join(root, name), Name: name}
	if _, err := git(root, "init", "-q", "-b", "main", r.Dir); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		return nil, fmt.Errorf("%s: reading the example config: %w", from, err)
	}
	if err := os.MkdirAll(filepath.Join(r.Dir, dir), 0o755); err != nil {
		return nil, err
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(r.Dir, dir, e.Name()), b, 0o644); err != nil {
			return nil, err
		}
	}
	_, err = r.commit("example HyperConverged config")
	return r, err
}

// edit replaces old by new in the work tree's file and commits with msg;
// it returns the new commit's SHA-1. It fails when file has no old.
func (r *configRepo) edit(file, old, new, msg string) (string, error) {
	p := filepath.Join(r.Dir, file)
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	s := strings.Replace(string(b), old, new, 1)
	if s == string(b) {
		return "", fmt.Errorf("%s: no %q to replace", p, old)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		return "", err
	}
	return r.commit(msg)
}

// head gives the last commit as `git log --oneline -1` prints it.
func (r *configRepo) head() string {
	s, err := git(r.Dir, "log", "--oneline", "-1")
	if err != nil {
		return err.Error()
	}
	return s
}

// commit commits everything and returns the commit's SHA-1.
func (r *configRepo) commit(msg string) (string, error) {
	if _, err := git(r.Dir, "add", "-A"); err != nil {
		return "", err
	}
	if _, err := git(r.Dir, "commit", "-q", "-m", msg); err != nil {
		return "", err
	}
	return git(r.Dir, "rev-parse", "HEAD")
}

// serveGit serves every repository below root read-only over smart HTTP
// with git http-backend (as a Git host would) on a free port of host,
// until ctx ends. It returns the base URL; a repository named n is at
// URL/n.
func serveGit(ctx context.Context, root, host string) (string, error) {
	execPath, err := git(root, "--exec-path")
	if err != nil {
		return "", err
	}
	backend := &cgi.Handler{
		Path: filepath.Join(execPath, "git-http-backend"),
		Env:  append([]string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}, gitEnv...),
	}
	if _, err := os.Stat(backend.Path); err != nil {
		return "", fmt.Errorf("git http-backend: %w", err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", fmt.Errorf("git server: listening on %s: %w", host, err)
	}
	srv := &http.Server{Handler: backend, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	return "http://" + l.Addr().String(), nil
}

// exampleDir finds testdata/example in the repository holding the working
// directory (make runs the demo from the root; this also works below it).
func exampleDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "testdata", "example")
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("testdata/example not found above the working directory: run the demo in the converge repository (make demo)")
		}
		dir = parent
	}
}

// serveConfig puts testdata/example into a new repository below root (in
// its directory configPath) and serves it on the node address, where the
// in-cluster converge-controller reaches the host, until ctx ends; it
// sets d.repo and d.url.
func (d *demo) serveConfig(ctx context.Context, root string) error {
	say("creating the config repository from testdata/example, served by git http-backend on the node address")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	example, err := exampleDir()
	if err != nil {
		return err
	}
	if d.repo, err = newConfigRepo(root, "config", example, configPath); err != nil {
		return err
	}
	// The local cluster's runtime keeps its pod network in its work
	// directory, not /etc/cni/net.d: the HyperConverged says so, as a
	// platform team with such nodes would commit it, so that the VM agent
	// attaches VMs to the same pod network (README, the pod network).
	hc := filepath.Join(d.repo.Dir, hcFile)
	b, err := os.ReadFile(hc)
	if err != nil {
		return err
	}
	with, err := d.env.WithPodNetwork(string(b), hcNamespace)
	if err != nil {
		return err
	}
	if err := os.WriteFile(hc, []byte(with), 0o644); err != nil {
		return err
	}
	if _, err := d.repo.commit("the nodes' pod network directories"); err != nil {
		return err
	}
	base, err := serveGit(ctx, root, localcluster.NodeIP)
	if err != nil {
		return err
	}
	d.url = base + "/" + d.repo.Name
	note("%s  branch main, %s/: %s", d.url, configPath, d.repo.head())
	return nil
}

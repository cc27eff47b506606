// Package gitops fetches a Git repository into a local cache and checks out
// one revision of it as a plain directory tree (an [Artifact]).
//
// # Sources
//
// A [Source] is a repository URL and a [Ref]. Supported URLs are local paths
// (absolute or relative to the working directory), file:// URLs, and
// http:// or https:// URLs. Local repositories are read in-process through
// go-git's embedded upload-pack server (no git binary is needed); they are
// still copied into the cache like a remote, so the cache never shares
// objects or files with the source repository. To do so the package
// registers a private go-git transport scheme, "converge-local", at init;
// go-git's own "file" transport is left alone. SSH and git:// URLs are
// rejected with [ErrUnsupportedScheme].
//
// Branch and tag refs are resolved on the remote at every Fetch. A commit ref
// must be reachable from a branch or tag of the remote; once a commit is in
// the cache it is served from there without contacting the remote. Work
// trees hold regular files, executables and symbolic links; submodules are
// not checked out.
//
// # Cache layout
//
// Every URL gets its own directory below [Options].CacheDir, named by the
// first 32 hex digits of the SHA-256 of the normalised URL:
//
//	<CacheDir>/<urlhash>/url             the URL (credentials redacted), for humans
//	<CacheDir>/<urlhash>/repo/           bare clone: objects, refs/remotes/origin/*, refs/tags/*
//	<CacheDir>/<urlhash>/worktrees/<sha> checked-out files of commit <sha> (no .git)
//
// The first [Fetcher.Fetch] of a URL clones into a temporary directory next
// to repo/ and renames it into place only when the clone succeeded. Later
// fetches download only the missing objects into the existing repo/ (one new
// pack file per fetch). Each commit is checked out into a temporary
// directory under worktrees/ that is renamed to worktrees/<sha> when
// complete, so a worktrees/<sha> directory is always a full tree of its
// commit and is never modified afterwards. Two refs that name the same commit
// share a directory.
//
// # Guarantees
//
//   - A failed Fetch does not touch existing worktrees and leaves repo/ usable:
//     go-git writes a pack file completely before it moves any ref, and a
//     failed first clone leaves no repo/ behind. The Dir of the last good
//     Artifact keeps its files. A repo/ that cannot be opened at all is
//     replaced by a fresh clone, once that clone has succeeded.
//   - After each successful Fetch the worktrees of the three most recently
//     used revisions of that URL are kept (the current one and the two used
//     before it); older ones are deleted, as are temporary directories older
//     than an hour. Callers that hold on to an old Artifact for longer than
//     a few fetches must copy what they need.
//   - Fetch calls for the same cache directory and URL are serialised within a
//     process (also across Fetchers that share a CacheDir). Concurrent use of
//     one cache directory by several processes is not supported.
//   - Artifacts are read-only by convention: do not modify files under Dir.
//     Symbolic links are checked out as links; [Artifact.Path] refuses paths
//     that leave Dir, but a caller walking a returned directory must not
//     follow links itself.
package gitops

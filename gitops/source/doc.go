// Package gitops fetches a Git repository into a local cache and checks out
// one revision of it as a plain directory tree (an [Artifact]), with the
// source features of Flux's GitRepository: credentials, semver tag ranges,
// commit and tag signature verification, shallow fetches and a bounded
// cache.
//
// # Sources
//
// A [Source] is a repository URL, a [Ref], optional credentials
// ([Source].Auth), an optional signature policy ([Source].Verify) and an
// optional timeout. Supported URLs are local paths (absolute or relative to
// the working directory), file:// URLs, http:// and https:// URLs, ssh://
// URLs and scp-like SSH addresses (git@host:org/repo.git). Local
// repositories are read in-process through go-git's embedded upload-pack
// server (no git binary is needed); they are still copied into the cache
// like a remote, so the cache never shares objects or files with the source
// repository. To do so the package registers a private go-git transport
// scheme, "converge-local", at init; go-git's own "file" transport is left
// alone. git:// URLs are rejected with [ErrUnsupportedScheme].
//
// Branch and tag refs are resolved on the remote at every Fetch, by the
// fetch's own ref advertisement (an HTTP fetch with nothing new is one
// request); the remote's default branch and a SemVer range list the
// remote's refs first. A SemVer
// ref lists the remote's tags and picks the highest version in the range
// (github.com/Masterminds/semver/v3, as Flux); the Artifact's Revision is
// then "<tag>@sha1:<commit>" as for a Tag ref. A commit ref must be
// reachable from a branch or tag of the remote; once a commit is in the
// cache it is served from there without contacting the remote. Work trees
// hold regular files, executables and symbolic links; submodules are not
// checked out.
//
// # Authentication
//
// [Auth] carries Flux's GitRepository credentials; [AuthFromSecret] reads
// them from a Secret's data (username, password, bearerToken, identity,
// known_hosts, ca.crt or the legacy caFile):
//
//   - HTTP(S): basic auth (Username, Password) or a bearer token, and extra
//     trusted CA certificates (CAPEM) for https://.
//   - SSH: a private key (Identity, optionally encrypted with Passphrase) and
//     a known_hosts list (KnownHosts). Both are required: the package never
//     connects to an SSH server whose host key it cannot check, and never
//     reads ~/.ssh/known_hosts or an SSH agent. The SSH user is the URL's,
//     else Auth.Username, else "git".
//
// Missing, incomplete or contradictory credentials, credentials the server
// refuses (HTTP 401/403, SSH key not accepted), an SSH host key that is
// unknown or differs from known_hosts, and an HTTPS certificate that no
// trusted CA signed all give errors wrapping [ErrAuthentication].
// Passwords, tokens and keys never appear in errors, in [Auth.String] or in
// the cache (the url file holds the URL with any password redacted; cache
// directory names are one-way digests).
//
// # Signature verification
//
// With Source.Verify set (see [Verification], [VerificationFromSecret]),
// Fetch checks after fetching and before checking out that the commit
// (mode HEAD), the annotated tag (mode Tag, Tag and SemVer refs only) or
// both (TagAndHEAD) carry a valid signature by one of the trusted keys:
// OpenPGP keys (Secret keys ending in .asc; verified with go-git's
// Commit.Verify/Tag.Verify, i.e. github.com/ProtonMail/go-crypto) or SSH
// keys (Secret keys ending in .pub; git's gpg.format=ssh signatures,
// namespace "git", verified with github.com/hiddeco/sshsig as in Flux).
// An unsigned object, a signature that does not verify, a signature by a
// key that is not trusted, and a lightweight tag in Tag mode give an error
// wrapping [ErrVerification] that names the commit or tag, the signing key
// id and the trusted key ids; no Artifact is returned and the revision is
// not checked out. On success [Artifact].Verified says what was verified by
// which key.
//
// # Timeouts
//
// Each network operation (listing the remote's refs; downloading objects)
// is bounded by Source.Timeout, or Options.Timeout when that is zero, as
// well as by the caller's context. For SSH the bound also covers the TCP
// dial and the SSH handshake: go-git ignores the context there, so the
// connection is opened through a dialer (registered with golang.org/x/net/
// proxy as the private type "converge-deadline") that sets a deadline on
// the connection itself. A server that accepts the connection and never
// answers fails with [ErrUnreachable] after the timeout.
//
// # Cache layout
//
// Every URL gets its own directory below [Options].CacheDir, named by the
// first 32 hex digits of the SHA-256 of the normalised URL (plus, when
// Source.Auth is set, a digest of the credentials, so that sources with
// different credentials never share a clone: a cached commit is never
// served to a Source that could not have fetched it):
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
// # Shallow fetches
//
// With [Options].Shallow, branch, tag and semver refs of remote
// repositories are fetched with depth 1: the clone holds the tip commit and
// its tree, not the history (in the package's test, 10 objects / 26 KB
// instead of 180 objects / 164 KB for 30 commits). Later fetches still go
// into the same clone; go-git's depth-1 fetch of a changed ref transfers the
// new tip's whole tree (not only the changed objects, as git's CLI would),
// never history. A commit ref that is not in the clone deepens it to the
// full history once (git fetch --unshallow). Local repositories are always
// fetched in full.
//
// # Cache size bound
//
// With [Options].MaxCacheBytes set, each successful Fetch ends by adding up
// the sizes of the files below CacheDir and, while the total is above the
// bound, deleting whole per-URL directories, least recently used first
// (each Fetch marks its directory as used). The directory just fetched and
// directories another Fetch of this process holds are never deleted, so the
// cache may stay above the bound. A directory is renamed to
// .evict-<urlhash> before it is deleted, so an interrupted eviction leaves
// nothing that looks like a clone; leftovers are removed by the next
// eviction. Artifacts of an evicted URL lose their files: callers must be
// done with an Artifact's Dir before fetching other URLs in a cache with a
// bound. An evicted URL is simply cloned again on its next Fetch.
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
package source

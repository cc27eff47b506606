// Package gitserver gives tests real Git repositories and real Git servers
// on loopback: repositories made with the git CLI, served by git
// http-backend (Debian's git) behind Go's net/http/cgi, over HTTP or HTTPS
// (a fresh CA per server), optionally behind basic or bearer
// authentication; and by an in-process SSH server (golang.org/x/crypto/ssh,
// public key auth) that runs the real git-upload-pack. An HTTP server can be
// taken down and brought back on the same address, also in the middle of a
// pack transfer (down.go), for fault tests. It is test support,
// not product code, but it lives in a normal package so that every
// package's integration tests share one server.
package gitserver

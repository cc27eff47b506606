// Package gitserver gives tests real Git repositories and a real Git server
// on loopback: repositories made with the git CLI, served by git
// http-backend (Debian's git) behind Go's net/http/cgi, over HTTP or HTTPS,
// optionally behind basic or bearer authentication. It is test support, not
// product code, but it lives in a normal package so that every package's
// integration tests share one server.
package gitserver

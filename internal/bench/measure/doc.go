// Package measure reads the figures the benchmarks of internal/bench
// compare across processes: API requests served, from kube-apiserver's
// apiserver_request_total, and a process's resident memory, from /proc.
package measure

package faults_test

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// SeedEnv replays a run: the seed its log printed. RoundsEnv changes how
// many faults the kill tests inject (20 by default).
const (
	SeedEnv   = "CONVERGE_FAULTS_SEED"
	RoundsEnv = "CONVERGE_FAULTS_ROUNDS"
)

// rounds gives how many faults a kill test injects: RoundsEnv, else 20.
func rounds(t *testing.T) int {
	t.Helper()
	s := os.Getenv(RoundsEnv)
	if s == "" {
		return 20
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", RoundsEnv, s)
	}
	return n
}

// newRand gives t's source of random fault moments, seeded from SeedEnv
// or the clock; the seed is logged so a failure can be replayed.
func newRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(SeedEnv); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want an unsigned integer", SeedEnv, s)
		}
		seed = v
	}
	t.Logf("fault seed %d (replay: %s=%d go test -run '^%s$' ./internal/e2e/faults)", seed, SeedEnv, seed, t.Name())
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// between gives a duration drawn uniformly from [lo, hi).
func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}

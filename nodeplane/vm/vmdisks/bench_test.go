package vmdisks_test

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"

	"github.com/converge-dev/converge/nodeplane/vm/vmdisks"
)

// BenchmarkContainerDiskPull prepares a containerDisk VMI from a 64 MiB
// qcow2 image on go-containerregistry's in-process registry: cold (an
// empty cache: pull, extract, qcow2 check, overlay), cached with
// IfNotPresent (no registry request: the overlay only) and cached with
// Always (the manifest, then the overlay). It reports each in ms and the
// ratios cold/cached and cold/floor, the floor being the same run's plain
// GET and gunzip of the layer blob (what any pull must at least do).
func BenchmarkContainerDiskPull(b *testing.B) {
	requireTool(b, "qemu-img", "qemu-utils")
	const size = 64 << 20
	raw := make([]byte, size)
	rng := rand.New(rand.NewSource(1))
	for off := 0; off < size; off += 2 << 20 { // half random, half zeros
		rng.Read(raw[off : off+1<<20])
	}
	dir := b.TempDir()
	rawPath, qcowPath := filepath.Join(dir, "d.raw"), filepath.Join(dir, "d.qcow2")
	if err := os.WriteFile(rawPath, raw, 0o644); err != nil {
		b.Fatal(err)
	}
	run(b, "qemu-img", "convert", "-f", "raw", "-O", "qcow2", rawPath, qcowPath)
	qcow, err := os.ReadFile(qcowPath)
	if err != nil {
		b.Fatal(err)
	}
	reg := startRegistry(b, "", "")
	reg.push(b, "bench/disk:1", map[string][]byte{"disk/disk.qcow2": qcow})
	image := reg.host + "/bench/disk:1"
	blobURL := layerURL(b, image)

	ctx := context.Background()
	prepare := func(d *vmdisks.Disks, vmi string, policy corev1.PullPolicy) time.Duration {
		start := time.Now()
		if err := d.Prepare(ctx, vmiWith(vmi, containerDisk("root", image, policy))); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var cold, ifNotPresent, always, floor time.Duration
	i := 0
	for b.Loop() {
		i++
		d, _ := newDisks(b, objects{}, objects{})
		cold += prepare(d, fmt.Sprintf("cold%d", i), corev1.PullIfNotPresent)
		ifNotPresent += prepare(d, fmt.Sprintf("ifnp%d", i), corev1.PullIfNotPresent)
		always += prepare(d, fmt.Sprintf("always%d", i), corev1.PullAlways)
		start := time.Now()
		fetchGunzip(b, blobURL)
		floor += time.Since(start)
	}
	ms := func(d time.Duration) float64 { return float64(d.Milliseconds()) / float64(i) }
	b.ReportMetric(ms(cold), "cold-ms")
	b.ReportMetric(ms(ifNotPresent), "cached-ms")
	b.ReportMetric(ms(always), "cached-always-ms")
	b.ReportMetric(ms(floor), "floor-ms")
	b.ReportMetric(float64(cold)/float64(ifNotPresent), "cold/cached")
	b.ReportMetric(float64(cold)/float64(floor), "cold/floor")
}

// layerURL gives the URL of the single layer blob of image.
func layerURL(b *testing.B, image string) string {
	ref, err := name.ParseReference(image)
	if err != nil {
		b.Fatal(err)
	}
	img, err := remote.Image(ref)
	if err != nil {
		b.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		b.Fatalf("layers: %d, %v", len(layers), err)
	}
	dg, err := layers[0].Digest()
	if err != nil {
		b.Fatal(err)
	}
	return fmt.Sprintf("http://%s/v2/%s/blobs/%s", ref.Context().RegistryStr(), ref.Context().RepositoryStr(), dg)
}

// fetchGunzip downloads and decompresses a blob, discarding it.
func fetchGunzip(b *testing.B, url string) {
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, zr); err != nil {
		b.Fatal(err)
	}
}
